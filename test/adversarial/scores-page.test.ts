import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/index.js';
import { openStore } from '../../src/store/index.js';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * A page of the scores list among many scored traces. Reading each listed trace's latest results
 * once walked every result of the project for every result of the page (a correlated
 * `max(scored_at)` that SQLite answered from the `(project, scored_at)` index): 1000 traces of
 * 10k scored ones held the thread answering requests for minutes, 100 traces of 1500 for seconds.
 * A page costs its own rows.
 */

const TRACES = 1500;
/**
 * What one page costs does not depend on its size in the old plan (every result of the project,
 * for each of them); a small page keeps the page's own work (its rows, parsing, the answer) far
 * within the budget on a loaded machine.
 */
const PAGE = 100;

const traceId = (n: number) => (n + 1).toString(16).padStart(32, '0');

function body(): string {
  const spans = Array.from({ length: TRACES }, (_, n) => ({
    traceId: traceId(n),
    spanId: '00000000000000a1',
    name: 'agent',
    kind: 1,
    startTimeUnixNano: '1763712000000000000',
    endTimeUnixNano: '1763712000500000000',
  }));
  return JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans }] }] });
}

describe('a page of the scores list among thousands of scored traces', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer('log_level: warn\n');
    const res = await fetch(`${server.base}/v1/traces`, {
      method: 'POST',
      body: body(),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    // Two policies, two versions of one of them, two evaluators each: what online scoring stores.
    const store = await openStore(
      { driver: 'sqlite' },
      { clock: systemClock, dataDir: server.dataDir },
    );
    try {
      const at = Date.now() - 60_000;
      for (let n = 0; n < TRACES; n++) {
        for (const [policy, digest, scoredAt] of [
          ['quality', 'old', at + n],
          ['quality', 'new', at + n + 1],
          ['safety', 'new', at + n + 1],
        ] as const) {
          await store.results.insert(
            {
              project: 'default',
              traceId: traceId(n),
              policy,
              digest,
              results: ['exact', 'contains'].map((evaluator) => ({
                evaluator,
                outcome: 'OUTCOME_SCORED' as const,
                scores: [{ name: evaluator, value: digest === 'new' ? 1 : 0 }],
                durationMs: 1,
              })),
              scoredAt,
            },
            false,
          );
        }
      }
    } finally {
      await store.close();
    }
  }, 120_000);
  afterAll(() => server?.stop());

  it('is read from its own rows: /healthz stays within budget, and each trace shows its latest version', async () => {
    // The first read compiles the read path; that is not what is measured.
    await (await fetch(`${server.base}/v1alpha1/scores?page_size=1`)).arrayBuffer();
    const { result, health } = await probeWhile(server.base, async () => {
      const res = await fetch(`${server.base}/v1alpha1/scores?page_size=${PAGE}`);
      return {
        status: res.status,
        page: (await res.json()) as {
          entries: { results: Record<string, { scores: { value: number }[] }[]> }[];
        },
      };
    });
    expect(result.status).toBe(200);
    expect(result.page.entries).toHaveLength(PAGE);
    for (const entry of result.page.entries) {
      expect(Object.keys(entry.results).sort()).toEqual(['quality', 'safety']);
      // The version stored last (its scores are 1), both of its evaluators, nothing of the older.
      expect(entry.results.quality?.map((r) => r.scores[0]?.value)).toEqual([1, 1]);
    }
    expect(health.failures, describeHealth(health)).toBe(0);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  }, 60_000);
});
