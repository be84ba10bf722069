import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OpenAiStub } from '../../test/support/openai-stub.js';
import { storeVariants } from '../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { CoreErrors, type EvalRecord, FakeClock } from '../core/index.js';
import { defaultRegistry } from '../evaluators/index.js';
import { openStore, type Store } from '../store/index.js';
import { WebhookOutbox } from '../webhooks/index.js';
import {
  type DatasetReader,
  preflightTarget,
  RunExecutor,
  type RunExecutorOptions,
  RunService,
  type TargetDeps,
} from './index.js';

/**
 * The run executor end to end on each store: targets (a local OpenAI-compatible stub, a local
 * command), trials and pass^k, gates, events in the outbox, adoption of a dead executor's run
 * without duplicates, cancel, shutdown hand-over, errors and deletion refusals.
 */

const T0 = Date.parse('2026-05-01T12:00:00Z');
const silent = { info() {}, warn() {} };

for (const variant of storeVariants()) {
  describe(`run executor on ${variant.name}`, () => {
    let dataDir: string;
    let dispose: () => Promise<void>;
    let store: Store;
    let clock: FakeClock;
    let stub: OpenAiStub;
    let baseUrl: string;
    const outbox = () => new WebhookOutbox({ clock });
    const registry = defaultRegistry();
    const datasets = new Map<string, EvalRecord[]>();
    const reader: DatasetReader = {
      async read(project, path) {
        if (path.includes('/boom/')) throw new Error('disk on fire');
        const records = datasets.get(`${project}/${path}`);
        if (records === undefined) throw CoreErrors.NOT_FOUND(`no dataset ${path}`);
        return records;
      },
    };
    const targets = (allowCommand = false): Omit<TargetDeps, 'project'> => ({
      env: { PATH: process.env.PATH },
      grants: 'all',
      allowCommand,
      outbound: { allowHosts: ['127.0.0.1'] },
      clock,
    });

    beforeEach(async () => {
      dataDir = mkdtempSync(join(tmpdir(), 'touchstone-runs-exec-'));
      const opened = await variant.open();
      dispose = opened.dispose;
      const config = loadConfig({ overrides: { data_dir: dataDir, ...opened.overrides } });
      clock = new FakeClock(T0);
      store = await openStore(config.store, { clock, dataDir });
      // Every project's run events land in the outbox through this webhook.
      await store.webhooks.upsert(
        {
          id: 'wh_1',
          project: 'p',
          name: 'ci',
          url: 'https://hooks.example.com/runs',
          events: [],
          secret: 'a-secret-of-enough-length',
          disabled: false,
        },
        clock.now(),
      );
      stub = new OpenAiStub();
      baseUrl = await stub.start();
    });

    afterEach(async () => {
      await stub.stop();
      await store.close();
      await dispose();
      rmSync(dataDir, { recursive: true, force: true });
    });

    const service = (allowCommand = false) =>
      new RunService({
        store,
        clock,
        registry,
        judgeExists: () => false,
        events: outbox(),
        logger: silent,
        datasets: reader,
        preflightTarget: (spec, project) =>
          preflightTarget(spec.target, spec.environment, { ...targets(allowCommand), project }),
      });
    const executor = (
      holder: string,
      options: Partial<RunExecutorOptions> = {},
      allowCommand = false,
    ) =>
      new RunExecutor({
        store,
        clock,
        registry,
        judge: () => undefined,
        events: outbox(),
        datasets: reader,
        targets: targets(allowCommand),
        holder,
        logger: silent,
        options: { flushItems: 2, ...options },
      });

    /** Deliveries the run's events wrote to the outbox (event, parsed payload). */
    async function deliveries(runId: string) {
      const page = await store.webhooks.listDeliveries('wh_1', { pageSize: 100 });
      return page.items
        .filter((d) => d.runId === runId)
        .map((d) => d.event)
        .sort();
    }

    const questions = [
      { id: 'q1', input: 'capital of France?', reference: 'Paris' },
      { id: 'q2', input: 'capital of Italy?', reference: 'Rome' },
      { id: 'q3', input: 'capital of Spain?', reference: 'Madrid' },
    ];
    /** q1 always right; q2 right on its first two calls, wrong on the third; q3 always wrong. */
    const scripted = (lastUser: string, seen: number) => {
      if (lastUser.includes('France')) return 'Paris';
      if (lastUser.includes('Italy')) return seen < 2 ? 'Rome' : 'Milan';
      return 'Barcelona';
    };

    it('runs an OpenAI-compatible target with trials: pass^k by hand, a failed gate, events', async () => {
      stub.answer = scripted;
      const created = await service().create(OPEN_PRINCIPAL, {
        name: 'capitals',
        project: 'p',
        dataset: { records: questions },
        target: { kind: 'openai-compatible', baseUrl, model: 'stub', retries: 0 },
        evaluators: [{ ref: 'exact-match' }],
        trials: 3,
        gates: ['exact-match.pass^3 >= 0.3', 'exact-match.pass^2 >= 0.5'],
      });
      expect(created).toMatchObject({
        status: 'RUN_STATUS_PENDING',
        progress: { total: 0, done: 0 },
      });
      const progress: number[] = [];
      const exec = new RunExecutor({
        store,
        clock,
        registry,
        judge: () => undefined,
        events: outbox(),
        targets: targets(),
        options: { flushItems: 2 },
        observer: { onProgress: (_id, done) => progress.push(done) },
      });
      await exec.drain();
      expect(stub.requests).toHaveLength(9);
      const run = await service().get(OPEN_PRINCIPAL, 'p', created.id);
      expect(run.status).toBe('RUN_STATUS_FAILED');
      expect(run.progress).toEqual({ total: 9, done: 9 });
      expect(progress.at(-1)).toBe(9);
      // Tasks: q1 3/3, q2 2/3, q3 0/3 → mean 5/9; pass^3 = 1/3; pass^2 = (1 + 1/3 + 0)/3 = 4/9.
      const [summary] = run.summaries as {
        mean: number;
        passHatK: Record<string, number>;
        passAtK: Record<string, number>;
        counts: unknown;
      }[];
      expect(summary?.mean).toBeCloseTo(5 / 9, 10);
      expect(summary?.passHatK['3']).toBeCloseTo(1 / 3, 10);
      expect(summary?.passHatK['2']).toBeCloseTo(4 / 9, 10);
      expect(summary?.passAtK['3']).toBeCloseTo(2 / 3, 10);
      expect(summary?.counts).toEqual({ scored: 9, skipped: 0, error: 0 });
      expect(run.gates).toEqual([
        {
          gate: { metric: 'exact-match.pass^3', min: 0.3 },
          passed: true,
          value: expect.closeTo(1 / 3, 10),
        },
        {
          gate: { metric: 'exact-match.pass^2', min: 0.5 },
          passed: false,
          value: expect.closeTo(4 / 9, 10),
        },
      ]);
      expect(await deliveries(run.id)).toEqual(['run.finished', 'run.gate_failed']);
      const payload = JSON.parse(
        (await store.webhooks.claimDue(clock.now(), 10, 6, clock.now() + 1000)).find(
          (d) => d.event === 'run.finished',
        )?.payload ?? '{}',
      );
      expect(payload.run).toMatchObject({ id: run.id, status: 'RUN_STATUS_FAILED' });
      expect(payload.run.spec).toBeUndefined();

      // Results per (record, trial), with what the target generated and its provenance in order.
      const page = await service().results(OPEN_PRINCIPAL, 'p', run.id, { pageSize: 4 });
      expect(page.items.map((i) => [i.recordId, i.trial])).toEqual([
        ['q1', 0],
        ['q1', 1],
        ['q1', 2],
        ['q2', 0],
      ]);
      expect(page.items[0]).toMatchObject({
        generated: { output: 'Paris', usage: { inputTokens: 10, outputTokens: 3 } },
        results: [
          { evaluator: 'exact-match', outcome: 'OUTCOME_SCORED', scores: [{ passed: true }] },
        ],
      });
      expect(page.nextPageToken).toBeDefined();
    });

    it('runs a command target here only where command targets are allowed', async () => {
      const spec = {
        name: 'echo',
        project: 'p',
        dataset: {
          records: [
            { id: 'a', input: 'ping', reference: 'PING' },
            { id: 'b', input: 'pong', reference: 'PONG!' },
          ],
        },
        target: {
          kind: 'command',
          argv: [
            process.execPath,
            '-e',
            'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(s.toUpperCase()))',
          ],
        },
        evaluators: [{ ref: 'exact-match' }],
        gates: ['exact-match >= 0.5'],
      };
      await expect(service(false).create(OPEN_PRINCIPAL, spec)).rejects.toMatchObject({
        code: 'RUN_SPEC_INVALID',
        details: [{ path: 'target.kind', message: 'command targets are not allowed here' }],
      });
      const created = await service(true).create(OPEN_PRINCIPAL, spec);
      await executor('cli', {}, true).drain();
      const run = await service().get(OPEN_PRINCIPAL, 'p', created.id);
      expect(run).toMatchObject({
        status: 'RUN_STATUS_SUCCEEDED',
        progress: { total: 2, done: 2 },
      });
      expect(run.summaries).toMatchObject([{ metric: 'exact-match', n: 2, passed: 1, mean: 0.5 }]);
      expect(await deliveries(run.id)).toEqual(['run.finished']);
    });

    it("adopts a dead executor's run once its lease lapses and does only the rest", async () => {
      stub.answer = (lastUser) => lastUser.replace('capital of ', '').replace('?', '');
      datasets.set(
        'p/datasets/p/geo/1.jsonl',
        Array.from({ length: 6 }, (_, i) => ({
          id: `r${i}`,
          input: `capital of X${i}?`,
          reference: `X${i}`,
        })),
      );
      const created = await service().create(OPEN_PRINCIPAL, {
        name: 'geo',
        project: 'p',
        dataset: { path: 'datasets/p/geo/1.jsonl' },
        target: { kind: 'openai-compatible', baseUrl, model: 'stub' },
        evaluators: [{ ref: 'exact-match' }, { ref: 'json-valid' }],
        trials: 2,
      });
      // The dead executor: it claimed the run, stored 4 items' results and one more item's
      // output, then stopped renewing.
      const dead = await store.runs.claim('dead', clock.now(), 30_000);
      expect(dead?.id).toBe(created.id);
      const outputs = [0, 1, 2, 3, 4].map((item) => ({
        recordIndex: Math.floor(item / 2),
        trial: item % 2,
        recordId: `r${Math.floor(item / 2)}`,
        output: JSON.stringify({ output: `X${Math.floor(item / 2)}` }),
      }));
      await store.withTransaction((tx) =>
        tx.runs.record(created.id, 'dead', clock.now(), 30_000, {
          done: 4,
          outputs,
          results: outputs.slice(0, 4).flatMap((o) =>
            ['exact-match', 'json-valid'].map((evaluator, position) => ({
              recordIndex: o.recordIndex,
              trial: o.trial,
              recordId: o.recordId,
              position,
              result: {
                evaluator,
                outcome: 'OUTCOME_SCORED' as const,
                scores: [{ name: evaluator, passed: evaluator === 'exact-match' }],
                durationMs: 0,
              },
            })),
          ),
        }),
      );
      const adopter = executor('adopter');
      await adopter.drain();
      expect((await store.runs.get(created.id))?.status).toBe('RUN_STATUS_RUNNING');
      expect(stub.requests).toHaveLength(0);

      clock.advance(30_000);
      await adopter.drain();
      const run = await service().get(OPEN_PRINCIPAL, 'p', created.id);
      expect(run).toMatchObject({
        status: 'RUN_STATUS_SUCCEEDED',
        progress: { total: 12, done: 12 },
      });
      // 12 items minus the 5 whose output was stored: 7 target calls; no result twice.
      expect(stub.requests).toHaveLength(7);
      const all = await store.runs.allResults(created.id);
      expect(all).toHaveLength(24);
      expect(
        new Set(all.map((r) => `${r.recordIndex}/${r.trial}/${r.result.evaluator}`)).size,
      ).toBe(24);
      expect(await deliveries(run.id)).toEqual(['run.finished']);
    });

    it('hands a run over on shutdown: another executor resumes at once without duplicates', async () => {
      stub.answer = () => ({ content: 'Paris', delayMs: 30 });
      const created = await service().create(OPEN_PRINCIPAL, {
        name: 'slow',
        project: 'p',
        dataset: {
          records: Array.from({ length: 20 }, (_, i) => ({
            id: `r${i}`,
            input: `q${i}`,
            reference: 'Paris',
          })),
        },
        target: { kind: 'openai-compatible', baseUrl, model: 'stub', concurrency: 2 },
        evaluators: [{ ref: 'exact-match' }],
      });
      const first = executor('first', { flushItems: 1 });
      first.start();
      await waitUntil(
        async () => ((await store.runs.get(created.id, { spec: false }))?.done ?? 0) >= 3,
      );
      await first.shutdown();
      const handedOver = await store.runs.get(created.id, { spec: false });
      expect(handedOver).toMatchObject({ status: 'RUN_STATUS_RUNNING' });
      expect(handedOver?.leaseHolder).toBeUndefined();
      await executor('second').drain();
      const run = await store.runs.get(created.id, { spec: false });
      expect(run).toMatchObject({ status: 'RUN_STATUS_SUCCEEDED', done: 20 });
      expect(await store.runs.allResults(created.id)).toHaveLength(20);
    });

    it('cancels a pending run at once and a running one at its next write', async () => {
      const svc = service();
      const pending = await svc.create(OPEN_PRINCIPAL, {
        name: 'never',
        project: 'p',
        dataset: { records: questions.map((q) => ({ ...q, output: q.reference })) },
        evaluators: [{ ref: 'exact-match' }],
        gates: ['exact-match >= 0.9'],
      });
      const cancelled = await svc.cancel(OPEN_PRINCIPAL, 'p', pending.id);
      expect(cancelled).toMatchObject({ status: 'RUN_STATUS_CANCELLED' });
      expect(await deliveries(pending.id)).toEqual(['run.finished']);
      // Cancelling again is a no-op.
      expect(await svc.cancel(OPEN_PRINCIPAL, 'p', pending.id)).toMatchObject({
        status: 'RUN_STATUS_CANCELLED',
      });

      stub.answer = () => ({ content: 'Paris', delayMs: 40 });
      const running = await svc.create(OPEN_PRINCIPAL, {
        name: 'long',
        project: 'p',
        dataset: {
          records: Array.from({ length: 50 }, (_, i) => ({
            id: `r${i}`,
            input: `q${i}`,
            reference: 'Paris',
          })),
        },
        target: { kind: 'openai-compatible', baseUrl, model: 'stub', concurrency: 1 },
        evaluators: [{ ref: 'exact-match' }],
      });
      const exec = executor('x', { flushItems: 1 });
      void exec.tick();
      await waitUntil(
        async () => ((await store.runs.get(running.id, { spec: false }))?.done ?? 0) >= 2,
      );
      const asked = await svc.cancel(OPEN_PRINCIPAL, 'p', running.id);
      expect(asked).toMatchObject({ status: 'RUN_STATUS_RUNNING', cancelRequested: true });
      const final = await exec.waitFor(running.id, { pollMs: 20 });
      expect(final.status).toBe('RUN_STATUS_CANCELLED');
      expect(final.done).toBeLessThan(50);
      expect(final.summaries?.[0]).toMatchObject({ n: final.done });
      await exec.drain();
    });

    it('ends in ERROR when nothing could be scored, never in a pass', async () => {
      stub.answer = () => ({ status: 500 });
      const created = await service().create(OPEN_PRINCIPAL, {
        name: 'down',
        project: 'p',
        dataset: { records: questions },
        target: { kind: 'openai-compatible', baseUrl, model: 'stub', retries: 0 },
        evaluators: [{ ref: 'exact-match' }],
      });
      await executor('e').drain();
      const run = await service().get(OPEN_PRINCIPAL, 'p', created.id);
      expect(run).toMatchObject({
        status: 'RUN_STATUS_ERROR',
        error: 'no result was scored (3 errors, 0 skipped); see the results',
      });
      const page = await service().results(OPEN_PRINCIPAL, 'p', created.id, { pageSize: 1 });
      expect(page.items[0]).toMatchObject({
        error: expect.stringMatching(/^TARGET_REQUEST_FAILED: /),
        results: [
          { outcome: 'OUTCOME_ERROR', reason: expect.stringMatching(/^the target failed: /) },
        ],
      });
      expect(await deliveries(run.id)).toEqual(['run.finished']);

      // A dataset gone by the time the run starts.
      datasets.set('p/datasets/p/gone/1.jsonl', [{ id: 'a', output: 'x', reference: 'x' }]);
      const gone = await service().create(OPEN_PRINCIPAL, {
        name: 'gone',
        project: 'p',
        dataset: { path: 'datasets/p/gone/1.jsonl' },
        evaluators: [{ ref: 'exact-match' }],
      });
      datasets.delete('p/datasets/p/gone/1.jsonl');
      await executor('f').drain();
      expect(await store.runs.get(gone.id, { spec: false })).toMatchObject({
        status: 'RUN_STATUS_ERROR',
        error: 'dataset datasets/p/gone/1.jsonl: no dataset datasets/p/gone/1.jsonl',
      });

      // An unexpected reader failure is not the run's fault: it stays running for another try.
      datasets.set('p/datasets/p/boom/1.jsonl', [{ id: 'a', output: 'x', reference: 'x' }]);
      const boom = await store.runs.create({
        id: 'run_boom',
        project: 'p',
        name: 'boom',
        labels: {},
        keep: false,
        spec: {
          dataset: { path: 'datasets/p/boom/1.jsonl' },
          evaluators: [{ ref: 'exact-match' }],
        },
        createdBy: 'open',
        createdAt: clock.now(),
      });
      const g = executor('g');
      await g.drain();
      expect((await store.runs.get(boom.id, { spec: false }))?.status).toBe('RUN_STATUS_RUNNING');
      // …and the executor can say why, for the CLI that drove it.
      expect(g.failureOf(boom.id)).toBe('disk on fire');
      expect(g.failureOf(gone.id)).toBeUndefined();
    });

    it('refuses to delete pending and running runs, then deletes the finished run with its results', async () => {
      const svc = service();
      const spec = {
        name: 'del',
        project: 'p',
        dataset: { records: questions.map((q) => ({ ...q, output: q.reference })) },
        evaluators: [{ ref: 'exact-match' }],
      };
      const created = await svc.create(OPEN_PRINCIPAL, spec);
      await expect(svc.delete(OPEN_PRINCIPAL, 'p', created.id)).rejects.toMatchObject({
        code: 'RUN_NOT_FINISHED',
        message: expect.stringContaining('pending'),
      });
      await store.runs.claim('holder', clock.now(), 30_000);
      await expect(svc.delete(OPEN_PRINCIPAL, 'p', created.id)).rejects.toMatchObject({
        code: 'RUN_NOT_FINISHED',
        message: expect.stringContaining('running'),
      });
      clock.advance(30_000);
      await executor('done').drain();
      expect((await svc.get(OPEN_PRINCIPAL, 'p', created.id)).status).toBe('RUN_STATUS_SUCCEEDED');
      expect(await store.runs.allResults(created.id)).toHaveLength(3);
      const deleted = await svc.delete(OPEN_PRINCIPAL, 'p', created.id);
      expect(deleted).toMatchObject({ id: created.id, status: 'RUN_STATUS_SUCCEEDED' });
      expect(await store.runs.allResults(created.id)).toEqual([]);
      await expect(svc.get(OPEN_PRINCIPAL, 'p', created.id)).rejects.toMatchObject({
        code: 'RUN_NOT_FOUND',
      });
      await expect(svc.delete(OPEN_PRINCIPAL, 'p', created.id)).rejects.toMatchObject({
        code: 'RUN_NOT_FOUND',
      });
      // Another project's run is not found, never forbidden.
      const other = await svc.create(OPEN_PRINCIPAL, { ...spec, project: 'q' });
      await expect(svc.get(OPEN_PRINCIPAL, 'p', other.id)).rejects.toMatchObject({
        code: 'RUN_NOT_FOUND',
      });
    });
  });
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}
