import { mkdtempSync, rmSync } from 'node:fs';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually, threadsOfThisProcess } from '../../test/support/process.js';
import { type Span, systemClock } from '../core/index.js';
import { openStore, type Store } from '../store/index.js';
import { CompleterThread } from './completer-thread.js';
import { TraceCompleter } from './pipeline.js';

const T = 'c'.repeat(32);

function span(spanId: string, parent: string, at: number): Span {
  return {
    traceId: T,
    spanId,
    parentSpanId: parent,
    name: parent === '' ? 'invoke_agent travel' : 'chat gpt-4o-mini',
    kind: 1,
    startTimeUnixNano: `${at}000000`,
    endTimeUnixNano: `${at + 5}000000`,
    attributes:
      parent === ''
        ? { 'gen_ai.operation.name': 'invoke_agent' }
        : { 'gen_ai.operation.name': 'chat' },
    events: [],
    links: [],
    status: { code: 0, message: '' },
    resource: { 'service.name': 'svc' },
    scope: { name: 's', version: '1' },
  };
}

describe('CompleterThread (SQLite)', () => {
  let dataDir: string;
  let store: Store;
  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-completer-'));
    store = await openStore(
      { store: { driver: 'sqlite' }, data_dir: dataDir },
      { clock: systemClock },
    );
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('completes traces in a worker thread with its own connection, recorded in the database', async () => {
    const now = Date.now();
    await store.traces.appendSpans(
      [
        {
          project: 'p',
          traceId: T,
          spans: [span('1'.repeat(16), '', now), span('2'.repeat(16), '1'.repeat(16), now)],
          labels: { team: 'a' },
          source: '',
        },
      ],
      now,
    );
    const rules = { graceMs: 50, idleMs: 30_000, maxAgeMs: 300_000 };
    // The in-process fallback must not be the one that completes the trace here.
    const fallback = new TraceCompleter({
      store,
      clock: systemClock,
      rules,
      normalize: () => {
        throw new Error('in-process fallback ran');
      },
    });
    let completed = 0;
    const thread = new CompleterThread({
      data: { store: { driver: 'sqlite' }, dataDir, rules, maxEventsPerSpan: 128, intervalMs: 20 },
      fallback,
      onCompleted: (n) => {
        completed += n;
      },
    });
    thread.start();
    try {
      const found = await eventually(async () => (await store.traces.get('p', T)) ?? undefined);
      expect(found.trace.name).toBe('invoke_agent travel');
      expect(found.trace.labels).toMatchObject({ team: 'a' });
      expect(found.trace.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(thread.inWorker).toBe(true);
      await eventually(async () => (completed === 1 ? true : undefined));
      expect(await store.traces.countOpen()).toBe(0);
      if (process.platform === 'linux') {
        // The worker yields to the thread answering requests: its own nice value, not the process's.
        expect(threadsOfThisProcess().map((t) => t.nice)).toContain(10);
        expect(getPriority()).toBe(0);
      }
    } finally {
      await thread.shutdown();
      await thread.shutdown();
    }
    expect(thread.inWorker).toBe(false);
  });
});
