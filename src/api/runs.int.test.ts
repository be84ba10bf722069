import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { storeVariants } from '../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';

/**
 * `/v1alpha1/runs` over REST on each store: create (plain, declarative, validate_only, refused
 * with every field named), list, get, results, `:cancel`, delete and its refusals, a key's
 * project, the run events in the webhook deliveries, Idempotency-Key on create.
 */

const records = [
  { id: 'q1', input: 'capital of France?', output: 'Paris', reference: 'Paris' },
  { id: 'q2', input: 'capital of Italy?', output: 'Milan', reference: 'Rome' },
  { id: 'q3', input: 'capital of Spain?', output: 'Madrid', reference: 'Madrid' },
];

const plain = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  dataset: { records },
  evaluators: [{ ref: 'exact-match' }, { ref: 'latency', params: { thresholdMs: 1000 } }],
  gates: ['exact-match >= 0.5'],
  ...extra,
});

for (const variant of storeVariants()) {
  describe(`runs over REST on ${variant.name}`, () => {
    let t: TestApp;
    let dispose: () => Promise<void>;
    let editor: string;
    let admin: string;
    let other: string;

    beforeAll(async () => {
      const opened = await variant.open();
      dispose = opened.dispose;
      t = await testApp({ ...opened.overrides, auth: {} });
      const key = async (project: string, role: 'editor' | 'admin') =>
        (await t.app.keys.create(OPEN_PRINCIPAL, { project, roles: [role] })).secret;
      editor = await key('shop', 'editor');
      admin = await key('shop', 'admin');
      other = await key('elsewhere', 'admin');
      await t.app.webhooks.service.apply(
        OPEN_PRINCIPAL,
        { name: 'ci', url: 'https://hooks.example.com/ci', secret: 'a-secret-of-enough-length' },
        { project: 'shop' },
      );
    });
    afterAll(async () => {
      await t.close();
      await dispose();
    });

    const call = (
      method: 'GET' | 'POST' | 'DELETE',
      url: string,
      body?: unknown,
      key = editor,
      headers: Record<string, string> = {},
    ) =>
      t.app.server.inject({
        method,
        url,
        ...(body === undefined ? {} : { payload: body as object }),
        headers: { authorization: `Bearer ${key}`, ...headers },
      });

    it('creates a run from a plain spec, runs it, and shows it with summaries and gates', async () => {
      const res = await call('POST', '/v1alpha1/runs', plain('nightly', { labels: { team: 'a' } }));
      expect(res.statusCode).toBe(200);
      const created = res.json();
      expect(created).toMatchObject({
        id: expect.stringMatching(/^run_[0-9a-f]{24}$/),
        name: 'nightly',
        project: 'shop',
        labels: { team: 'a' },
        status: 'RUN_STATUS_PENDING',
        summaries: [],
        gates: [],
        createdBy: expect.stringMatching(/^key_/),
        progress: { total: 0, done: 0 },
        spec: { evaluators: plain('nightly').evaluators, gates: ['exact-match >= 0.5'] },
      });
      await t.app.runExecutor.drain();
      const got = (await call('GET', `/v1alpha1/runs/${created.id}`)).json();
      expect(got).toMatchObject({
        status: 'RUN_STATUS_SUCCEEDED',
        progress: { total: 3, done: 3 },
        startedAt: expect.any(String),
        finishedAt: expect.any(String),
        gates: [{ gate: { metric: 'exact-match', min: 0.5 }, passed: true, value: 2 / 3 }],
      });
      expect(got.summaries.map((s: { metric: string }) => s.metric)).toEqual([
        'exact-match',
        'latency',
        'latency.within',
      ]);
      // Records without usage: the latency evaluator skipped them, and that is not a zero.
      expect(got.summaries[1]).toMatchObject({ n: 0, mean: null, counts: { skipped: 3 } });
      // The basic view is the same run without its spec (what the CLI polls).
      const basic = (await call('GET', `/v1alpha1/runs/${created.id}?view=basic`)).json();
      expect(basic).not.toHaveProperty('spec');
      const { spec: _spec, ...withoutSpec } = got;
      expect(basic).toEqual(withoutSpec);
      const badView = await call('GET', `/v1alpha1/runs/${created.id}?view=everything`);
      expect(badView.statusCode).toBe(400);
      expect(badView.json().error.details).toEqual([expect.objectContaining({ path: 'view' })]);

      const page = (await call('GET', `/v1alpha1/runs/${created.id}/results?page_size=2`)).json();
      expect(page.results.map((r: { recordId: string }) => r.recordId)).toEqual(['q1', 'q2']);
      expect(page.results[1].results[0]).toMatchObject({
        evaluator: 'exact-match',
        scores: [{ name: 'exact-match', passed: false }],
      });
      const rest = (
        await call(
          'GET',
          `/v1alpha1/runs/${created.id}/results?page_size=2&page_token=${page.next_page_token}`,
        )
      ).json();
      expect(rest.results.map((r: { recordId: string }) => r.recordId)).toEqual(['q3']);
      expect(rest.next_page_token).toBeUndefined();

      // The run's events reached the webhook's deliveries.
      const deliveries = (
        await call('GET', '/v1alpha1/webhooks/ci/deliveries', undefined, admin)
      ).json();
      expect(
        deliveries.deliveries
          .filter((d: { runId?: string }) => d.runId === created.id)
          .map((d: { event: string }) => d.event),
      ).toEqual(['run.finished']);
    });

    it('takes the declarative form, ?project= and validate_only', async () => {
      const declarative = {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'Run',
        metadata: { name: 'gated', labels: { 'touchstone.dev/project': 'shop' } },
        spec: {
          dataset: { records },
          evaluators: [{ ref: 'exact-match' }],
          gates: ['exact-match >= 0.9'],
        },
      };
      const dry = await call('POST', '/v1alpha1/runs?validate_only=true', declarative);
      expect(dry.statusCode).toBe(200);
      expect(dry.json()).toMatchObject({ id: '', status: 'RUN_STATUS_PENDING', name: 'gated' });
      const before = (await call('GET', '/v1alpha1/runs?project=shop')).json().runs.length;
      const res = await call('POST', '/v1alpha1/runs?project=shop', declarative);
      expect(res.statusCode).toBe(200);
      await t.app.runExecutor.drain();
      const got = (await call('GET', `/v1alpha1/runs/${res.json().id}?project=shop`)).json();
      expect(got).toMatchObject({
        status: 'RUN_STATUS_FAILED',
        gates: [{ gate: { metric: 'exact-match', min: 0.9 }, passed: false }],
      });
      const list = (await call('GET', '/v1alpha1/runs?page_size=1')).json();
      expect(list.runs).toHaveLength(1);
      expect(list.runs[0].id).toBe(res.json().id);
      expect(list.runs[0].spec).toBeUndefined();
      expect(list.next_page_token).toBeDefined();
      expect((await call('GET', '/v1alpha1/runs?project=shop')).json().runs).toHaveLength(
        before + 1,
      );
    });

    it('refuses a bad spec naming every field, and nothing is stored', async () => {
      const before = (await call('GET', '/v1alpha1/runs')).json().runs.length;
      const res = await call('POST', '/v1alpha1/runs', {
        name: 'bad',
        dataset: { records: [{ input: 'x', outptu: 'secret-value-123' }] },
        evaluators: [{ ref: 'exact-mach' }],
        trials: 0,
        gates: ['exact-match >> 1'],
      });
      expect(res.statusCode).toBe(400);
      const { error } = res.json();
      expect(error.code).toBe('RUN_SPEC_INVALID');
      expect(error.details.map((d: { path: string }) => d.path)).toEqual(
        expect.arrayContaining([
          'dataset.records[0].outptu',
          'trials',
          'evaluators[0].ref',
          'gates[0]',
        ]),
      );
      expect(res.body).not.toContain('secret-value-123');
      expect((await call('GET', '/v1alpha1/runs')).json().runs).toHaveLength(before);
      // A target here needs grants and public hosts (or runs.allow_hosts).
      const target = await call(
        'POST',
        '/v1alpha1/runs',
        plain('t', {
          dataset: { records: [{ input: 'x', reference: 'y' }] },
          target: { kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' },
        }),
      );
      expect(target.statusCode).toBe(400);
      expect(target.json().error.details).toEqual([
        { path: 'target.baseUrl', message: expect.stringContaining('runs.allow_hosts') },
      ]);
    });

    it('refuses a spec sent as YAML text that holds an alias bomb, or is over 16 KiB (400, at once)', async () => {
      const text = (yaml: string) =>
        t.app.server.inject({
          method: 'POST',
          url: '/v1alpha1/runs',
          payload: JSON.stringify(yaml),
          headers: { authorization: `Bearer ${editor}`, 'content-type': 'application/json' },
        });
      const lines = ['name: bomb', 'l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
      for (let i = 1; i <= 10; i++) lines.push(`l${i}: &l${i} [${Array(9).fill(`*l${i - 1}`)}]`);
      const started = performance.now();
      const bomb = await text(lines.join('\n'));
      expect(performance.now() - started).toBeLessThan(2000);
      expect(bomb.statusCode).toBe(400);
      expect(bomb.json().error).toMatchObject({
        code: 'RUN_SPEC_INVALID',
        details: [
          { path: '(root)', message: 'not YAML or JSON: an alias expands to more than 100 nodes' },
        ],
      });
      const large = await text(`name: big\nnote: "${'x'.repeat(16 * 1024)}"\n`);
      expect(large.statusCode).toBe(400);
      expect(large.json().error.details[0].message).toBe(
        'not YAML or JSON: longer than 16384 bytes',
      );
    });

    it('cancels, refuses to delete unfinished runs, deletes finished ones', async () => {
      const created = (await call('POST', '/v1alpha1/runs', plain('doomed'))).json();
      const refused = await call('DELETE', `/v1alpha1/runs/${created.id}`, undefined, admin);
      expect(refused.statusCode).toBe(400);
      expect(refused.json().error.code).toBe('RUN_NOT_FINISHED');
      // An editor may cancel but not delete (runs.delete is admin-only by default).
      const cancelled = await call('POST', `/v1alpha1/runs/${created.id}:cancel`);
      expect(cancelled.json()).toMatchObject({ status: 'RUN_STATUS_CANCELLED' });
      expect((await call('DELETE', `/v1alpha1/runs/${created.id}`)).statusCode).toBe(403);
      // Another project's key sees no such run.
      const foreign = await call('DELETE', `/v1alpha1/runs/${created.id}`, undefined, other);
      expect(foreign.statusCode).toBe(404);
      expect(foreign.json().error.code).toBe('RUN_NOT_FOUND');
      const deleted = await call('DELETE', `/v1alpha1/runs/${created.id}`, undefined, admin);
      expect(deleted.statusCode).toBe(200);
      expect(deleted.json()).toMatchObject({ id: created.id, status: 'RUN_STATUS_CANCELLED' });
      expect((await call('GET', `/v1alpha1/runs/${created.id}`)).statusCode).toBe(404);
      expect((await call('GET', `/v1alpha1/runs/${created.id}/results`)).statusCode).toBe(404);
    });

    it('runs an uploaded dataset by the path the upload returned', async () => {
      const jsonl = records.map((r) => JSON.stringify(r)).join('\n');
      const upload = await t.app.server.inject({
        method: 'POST',
        url: '/v1alpha1/datasets/capitals/upload?project=shop&format=jsonl',
        payload: jsonl,
        headers: { authorization: `Bearer ${editor}`, 'content-type': 'application/x-ndjson' },
      });
      expect(upload.statusCode).toBe(200);
      const { path } = upload.json();
      const res = await call('POST', '/v1alpha1/runs', {
        name: 'uploaded',
        dataset: { path },
        evaluators: [{ ref: 'exact-match' }],
        trials: 2,
        gates: ['exact-match.pass^2 >= 0.6'],
      });
      expect(res.statusCode).toBe(200);
      await t.app.runExecutor.drain();
      const run = (await call('GET', `/v1alpha1/runs/${res.json().id}`)).json();
      // Two of three records hold the right output in both trials: pass^2 = 2/3.
      expect(run).toMatchObject({
        status: 'RUN_STATUS_SUCCEEDED',
        progress: { total: 6, done: 6 },
        gates: [{ passed: true, value: 2 / 3 }],
      });
      // Another project's path, or one never uploaded, is refused at create.
      const missing = await call('POST', '/v1alpha1/runs', {
        name: 'missing',
        dataset: { path: path.replace(/[0-9a-f]{64}/, '0'.repeat(64)) },
        evaluators: [{ ref: 'exact-match' }],
      });
      expect(missing.statusCode).toBe(400);
      expect(missing.json().error).toMatchObject({
        code: 'RUN_SPEC_INVALID',
        details: [{ path: 'dataset.path' }],
      });
    });

    it('replays a create with the same Idempotency-Key instead of creating a second run', async () => {
      const key = { 'idempotency-key': `create-${variant.name}-1` };
      const first = await call('POST', '/v1alpha1/runs', plain('once'), editor, key);
      const again = await call('POST', '/v1alpha1/runs', plain('once'), editor, key);
      expect(first.statusCode).toBe(200);
      expect(again.statusCode).toBe(200);
      expect(again.json().id).toBe(first.json().id);
      const changed = await call('POST', '/v1alpha1/runs', plain('twice'), editor, key);
      expect(changed.statusCode).toBe(409);
    });
  });
}
