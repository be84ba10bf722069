import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER, type RunningOperator, startOperator } from '../../src/operator/index.js';
import { eventually, kill9 } from '../support/process.js';
import { FakeKube } from './fake-kube.js';
import { type OperatorServer, startOperatorServer } from './operator-server.js';

/**
 * The operator, in process, against the fake Kubernetes API (fake-kube.ts) and a real
 * `touchstone serve` process with API keys on; its TraceSource pulls from the Langfuse contract
 * fake. Two operator instances elect a leader through a Lease. The steps run in order and build
 * on each other.
 */

type Json = Record<string, unknown>;
const NS = 'support';
const SOURCES = 'touchstone.dev/tracesources';
const POLICIES = 'touchstone.dev/onlineevalpolicies';
const WEBHOOKS = 'touchstone.dev/webhooks';
const RUNS = 'touchstone.dev/evalruns';
const PROJECT = { 'touchstone.dev/project': NS };

const meta = (o: Json | undefined) => (o?.metadata ?? {}) as Json;
const statusOf = (o: Json | undefined) => (o?.status ?? {}) as Json;
const ready = (o: Json | undefined) =>
  ((statusOf(o).conditions ?? []) as Json[]).find((c) => c.type === 'Ready');

function resource(kind: string, name: string, spec: Json): Json {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind,
    metadata: { name, namespace: NS, labels: PROJECT },
    spec,
  };
}

describe('touchstone operator against a fake Kubernetes API and a real server', () => {
  let dir = '';
  let kube: FakeKube;
  let touchstone: OperatorServer;
  const operators: RunningOperator[] = [];
  const logs: string[] = [];

  const api = (method: string, path: string) => touchstone.api(method, path);
  const get = (collection: string, name: string) => kube.get(collection, NS, name);
  const until = <T>(check: () => T | undefined | false, ms = 30_000) =>
    eventually(async () => check() || undefined, ms);
  const readyWith = (collection: string, name: string, reason: string) =>
    until(() => {
      const o = get(collection, name);
      return ready(o)?.reason === reason ? o : undefined;
    });
  const warning = (name: string, reason: string) =>
    until(() =>
      kube
        .events(NS)
        .find(
          (e) =>
            e.type === 'Warning' && e.reason === reason && (e.involvedObject as Json).name === name,
        ),
    );

  const start = (identity: string): RunningOperator => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(kube.kubeconfig());
    const operator = startOperator({
      kubeConfig,
      namespace: '',
      server: { url: touchstone.server.base, apiKey: touchstone.key, timeoutMs: 5000 },
      lease: { namespace: 'touchstone', name: 'touchstone-operator', identity, durationMs: 3000 },
      timing: { resyncMs: 60_000, statusIntervalMs: 500, backoffBaseMs: 200, backoffMaxMs: 1500 },
      log: {
        info: (msg, f) => logs.push(`${identity} info ${msg} ${JSON.stringify(f ?? {})}`),
        warn: (msg, f) => logs.push(`${identity} warn ${msg} ${JSON.stringify(f ?? {})}`),
      },
    });
    operators.push(operator);
    return operator;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-operator-'));
    touchstone = await startOperatorServer(dir, NS);
    kube = await FakeKube.start();
  }, 120_000);

  afterAll(async () => {
    for (const o of operators) await o.stop();
    await touchstone?.close();
    await kube?.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('two operators elect one leader through a Lease', async () => {
    const a = start('operator-a');
    const b = start('operator-b');
    await until(() => a.isLeader || b.isLeader);
    expect([a.isLeader, b.isLeader].filter(Boolean)).toHaveLength(1);
    const lease = kube.get('coordination.k8s.io/leases', 'touchstone', 'touchstone-operator');
    expect((lease?.spec as Json | undefined)?.holderIdentity).toBe(
      a.isLeader ? 'operator-a' : 'operator-b',
    );
  });

  it('a source naming a missing policy is admitted with a warning, and syncs once the policy exists', async () => {
    kube.apply(
      SOURCES,
      resource('TraceSource', 'prod-langfuse', touchstone.sourceSpec(['quality'])),
    );
    const waiting = await readyWith(SOURCES, 'prod-langfuse', 'PolicyNotFound');
    expect(ready(waiting)).toMatchObject({ status: 'False' });
    expect(meta(waiting).finalizers).toEqual([FINALIZER]);
    await warning('prod-langfuse', 'PolicyNotFound');
    expect((await api('GET', `/v1alpha1/sources/prod-langfuse?project=${NS}`)).status).toBe(404);

    kube.apply(
      POLICIES,
      resource('OnlineEvalPolicy', 'quality', {
        stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
      }),
    );
    await readyWith(POLICIES, 'quality', 'Synced');
    const synced = await readyWith(SOURCES, 'prod-langfuse', 'Synced');
    expect(statusOf(synced).observedGeneration).toBe(1);
    expect((await api('GET', `/v1alpha1/sources/prod-langfuse?project=${NS}`)).status).toBe(200);
  }, 60_000);

  it('mirrors the source status: pulled and scored counts, watermark, phase', async () => {
    const source = await until(() => {
      const o = get(SOURCES, 'prod-langfuse');
      return Number(statusOf(o).pulled) >= 3 ? o : undefined;
    }, 60_000);
    const status = statusOf(source);
    expect(typeof status.scored).toBe('number');
    expect(status.phase).toMatch(/^(backfilling|tailing)$/);
    expect(Date.parse(String(status.watermark))).toBeGreaterThan(0);
    const onServer = (await api('GET', `/v1alpha1/sources/prod-langfuse?project=${NS}`)).body;
    expect((onServer.status as Json).pulled).toBe(status.pulled);
  }, 90_000);

  it('a Webhook whose Secret is missing gets a clear condition, and syncs once the Secret exists', async () => {
    kube.apply(
      WEBHOOKS,
      resource('Webhook', 'ci-notify', {
        url: 'http://127.0.0.1:9/hooks/touchstone',
        events: ['run.finished'],
        secretRef: { name: 'ci-webhook', key: 'secret' },
      }),
    );
    const missing = await readyWith(WEBHOOKS, 'ci-notify', 'SecretMissing');
    expect(ready(missing)?.message).toBe(`Secret ${NS}/ci-webhook does not exist`);
    await warning('ci-notify', 'SecretMissing');

    const value = 'a-signing-secret-of-some-length';
    kube.putSecret(NS, 'ci-webhook', { secret: value });
    const synced = await readyWith(WEBHOOKS, 'ci-notify', 'Synced');
    expect(statusOf(synced).secretSet).toBe(true);
    expect(JSON.stringify(synced)).not.toContain(value);
    expect(JSON.stringify(kube.events(NS))).not.toContain(value);
    expect(logs.join('\n')).not.toContain(value);
    expect((await api('GET', `/v1alpha1/webhooks/ci-notify?project=${NS}`)).body).toMatchObject({
      secretSet: true,
    });
  }, 60_000);

  it('an EvalRun creates one run and mirrors its phase and gates', async () => {
    kube.apply(
      RUNS,
      resource('EvalRun', 'release-1', {
        dataset: {
          records: [
            { id: 'a', input: 'capital of France?', output: 'Paris', reference: 'Paris' },
            { id: 'b', input: '2 + 2?', output: '5', reference: '4' },
          ],
        },
        evaluators: [{ ref: 'exact-match' }],
        gates: ['exact-match >= 0.4'],
      }),
    );
    const done = await until(() => {
      const o = get(RUNS, 'release-1');
      return statusOf(o).phase === 'Succeeded' ? o : undefined;
    }, 60_000);
    expect(statusOf(done)).toMatchObject({ gatesPassed: 1, gatesTotal: 1 });
    const runs = (await api('GET', `/v1alpha1/runs?project=${NS}`)).body.runs as Json[];
    expect(runs.filter((r) => r.name === 'release-1')).toHaveLength(1);
    expect(runs[0]?.id).toBe(statusOf(done).runId);
  }, 90_000);

  it('relists after 410 Gone and goes on reconciling', async () => {
    kube.compact();
    kube.apply(
      POLICIES,
      resource('OnlineEvalPolicy', 'after-gone', {
        stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
      }),
    );
    await readyWith(POLICIES, 'after-gone', 'Synced');
    expect(kube.gone).toBeGreaterThan(0);
  }, 60_000);

  it('the other operator takes over when the leader stops', async () => {
    const leader = operators.find((o) => o.isLeader);
    const other = operators.find((o) => !o.isLeader);
    await leader?.stop();
    await until(() => other?.isLeader);
    kube.apply(
      POLICIES,
      resource('OnlineEvalPolicy', 'after-failover', {
        stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
      }),
    );
    await readyWith(POLICIES, 'after-failover', 'Synced');
  }, 60_000);

  it('deleting a TraceSource deletes the source and keeps its pulled traces; deleting a Webhook deletes it', async () => {
    kube.delete(SOURCES, NS, 'prod-langfuse');
    kube.delete(WEBHOOKS, NS, 'ci-notify');
    await until(
      () => get(SOURCES, 'prod-langfuse') === undefined && get(WEBHOOKS, 'ci-notify') === undefined,
    );
    expect((await api('GET', `/v1alpha1/sources/prod-langfuse?project=${NS}`)).status).toBe(404);
    expect((await api('GET', `/v1alpha1/webhooks/ci-notify?project=${NS}`)).status).toBe(404);
    const traces = (await api('GET', `/v1alpha1/traces?project=${NS}`)).body;
    expect((traces.traces as Json[]).length).toBeGreaterThanOrEqual(3);
  }, 60_000);

  it('with the server unreachable: backs off, reports a condition, deletes nothing', async () => {
    await kill9(touchstone.server);
    const policy = get(POLICIES, 'quality') as Json;
    kube.apply(POLICIES, {
      ...policy,
      spec: { ...(policy.spec as Json), sampling: { rate: 0.5 } },
    });
    const down = await readyWith(POLICIES, 'quality', 'ServerUnreachable');
    expect(ready(down)?.message).toMatch(/^cannot reach the Touchstone server/);
    kube.delete(POLICIES, NS, 'after-gone');
    await new Promise((r) => setTimeout(r, 1500));
    // Its finalizer stays until the server confirms the deletion.
    expect(meta(get(POLICIES, 'after-gone')).finalizers).toEqual([FINALIZER]);
    expect(get(POLICIES, 'quality')).toBeDefined();
    await warning('quality', 'ServerUnreachable');
  }, 60_000);
});
