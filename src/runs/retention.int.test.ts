import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeVariants } from '../../test/support/stores.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';
import { openStore, type Store } from '../store/index.js';
import { RunRetention } from './index.js';

/** The retention sweep against a fake clock, on each store; two sweepers at once. */

const T0 = Date.parse('2026-06-01T00:00:00Z');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

for (const variant of storeVariants()) {
  describe(`run retention on ${variant.name}`, () => {
    let dataDir: string;
    let dispose: () => Promise<void>;
    let store: Store;
    let clock: FakeClock;

    beforeEach(async () => {
      dataDir = mkdtempSync(join(tmpdir(), 'touchstone-runs-retention-'));
      const opened = await variant.open();
      dispose = opened.dispose;
      // The documented settings: 2160h by default, per project overrides, 0 = forever.
      const config = loadConfig({
        overrides: {
          data_dir: dataDir,
          ...opened.overrides,
          runs: { project_retention: { short: '24h', archive: '0' } },
        },
      });
      expect(config.runs.retention).toBe(2160 * HOUR);
      clock = new FakeClock(T0);
      store = await openStore(config.store, { clock, dataDir });
    });

    afterEach(async () => {
      await store.close();
      await dispose();
      rmSync(dataDir, { recursive: true, force: true });
    });

    /** A run of `project` finished at `finishedAt`, with one result. */
    async function finished(id: string, project: string, finishedAt: number, keep = false) {
      await store.runs.create({
        id,
        project,
        name: id,
        labels: keep ? { 'touchstone.keep': 'true' } : {},
        keep,
        spec: {
          dataset: { records: [{ id: 'a', output: 'x' }] },
          evaluators: [{ ref: 'exact-match' }],
        },
        createdBy: 'open',
        createdAt: finishedAt - 1000,
      });
      clock.set(finishedAt - 500);
      await store.runs.claim(`h-${id}`, clock.now(), 30_000);
      await store.withTransaction((tx) =>
        tx.runs.record(id, `h-${id}`, clock.now(), 30_000, {
          done: 1,
          outputs: [],
          results: [
            {
              recordIndex: 0,
              trial: 0,
              recordId: 'a',
              position: 0,
              result: {
                evaluator: 'exact-match',
                outcome: 'OUTCOME_SKIPPED',
                scores: [],
                durationMs: 0,
              },
            },
          ],
        }),
      );
      await store.runs.finish(id, `h-${id}`, finishedAt, {
        status: 'RUN_STATUS_SUCCEEDED',
        summaries: [],
        gates: [],
        finishedAt,
      });
    }

    const ids = async () =>
      (await store.runs.list(undefined, { pageSize: 100 })).items.map((r) => r.id).sort();

    it('deletes finished runs past their retention, sparing kept runs, forever-projects and running runs', async () => {
      await finished('run_old', 'p', T0);
      await finished('run_old_kept', 'p', T0, true);
      await finished('run_recent', 'p', T0 + 80 * DAY);
      await finished('run_short_old', 'short', T0 + 88 * DAY);
      await finished('run_short_new', 'short', T0 + 90 * DAY);
      await finished('run_archive', 'archive', T0);
      await store.runs.create({
        id: 'run_pending',
        project: 'p',
        name: 'pending',
        labels: {},
        keep: false,
        spec: {},
        createdBy: 'open',
        createdAt: T0,
      });

      // `0` unquoted in YAML is a number: it keeps forever too.
      const config = loadConfig({
        overrides: { data_dir: dataDir, runs: { project_retention: { short: '24h', archive: 0 } } },
      });
      expect(config.runs.project_retention).toEqual({ short: DAY, archive: 0 });
      const sweeper = new RunRetention({
        store,
        clock,
        options: {
          retentionMs: config.runs.retention,
          projectRetentionMs: config.runs.project_retention,
          intervalMs: HOUR,
        },
      });

      // 90 days and a half after T0: run_old is past 2160h, run_short_old past 24h.
      clock.set(T0 + 90 * DAY + 12 * HOUR);
      // Two replicas sweeping at once delete each run once between them.
      const other = new RunRetention({
        store,
        clock,
        options: {
          retentionMs: config.runs.retention,
          projectRetentionMs: config.runs.project_retention,
          intervalMs: HOUR,
        },
      });
      const [a, b] = await Promise.all([sweeper.sweep(), other.sweep()]);
      expect(a + b).toBe(2);
      expect(await ids()).toEqual([
        'run_archive',
        'run_old_kept',
        'run_pending',
        'run_recent',
        'run_short_new',
      ]);
      expect(await store.runs.allResults('run_old')).toEqual([]);
      expect(await store.runs.allResults('run_recent')).toHaveLength(1);

      // A year later only kept runs, forever-projects and the unfinished run remain.
      clock.advance(365 * DAY);
      expect(await sweeper.sweep()).toBe(2);
      expect(await ids()).toEqual(['run_archive', 'run_old_kept', 'run_pending']);
      expect(await sweeper.sweep()).toBe(0);
    });

    it('keeps everything with a global retention of 0', async () => {
      await finished('run_a', 'p', T0);
      const sweeper = new RunRetention({
        store,
        clock,
        options: { retentionMs: 0, projectRetentionMs: {}, intervalMs: HOUR },
      });
      clock.advance(10_000 * DAY);
      expect(await sweeper.sweep()).toBe(0);
      expect(await ids()).toEqual(['run_a']);
      await sweeper.shutdown();
      await sweeper.shutdown();
    });
  });
}
