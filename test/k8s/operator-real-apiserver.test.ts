import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { FINALIZER } from '../../src/operator/index.js';
import { kubeMessage, kubeStatus } from '../../src/operator/kube.js';
import { ENTRY, eventually } from '../support/process.js';
import { makeCertificates, startTestWebhook } from './admission-harness.js';
import { type OperatorServer, startOperatorServer } from './operator-server.js';
import { chartCrds, RealKube, realApiServerMissing } from './real-apiserver.js';

/**
 * `touchstone operator` processes against a real Kubernetes API server (etcd and kube-apiserver,
 * real-apiserver.ts) and a real `touchstone serve` whose TraceSource pulls from the Langfuse
 * contract fake. The API server itself judges the chart's CRDs and the custom resources, keeps
 * the status subresource, Events and the leader Lease, and runs the finalizer protocol. The steps
 * run in order and build on each other.
 */

type Json = Record<string, unknown>;
const NS = 'support';
const LEASE_NS = 'touchstone';
const KEY_FIELD = 'TOUCHSTONE_API_KEY';

if (realApiServerMissing !== undefined) {
  console.warn(`operator-real-apiserver.test.ts skipped: ${realApiServerMissing}`);
}

const plural = { TraceSource: 'tracesources', OnlineEvalPolicy: 'onlineevalpolicies' } as const;

function resource(kind: keyof typeof plural, name: string, spec: Json): Json {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind,
    metadata: { name, namespace: NS, labels: { 'touchstone.dev/project': NS } },
    spec,
  };
}

const meta = (o: Json | undefined) => (o?.metadata ?? {}) as Json;
const statusOf = (o: Json | undefined) => (o?.status ?? {}) as Json;
const ready = (o: Json | undefined) =>
  ((statusOf(o).conditions ?? []) as Json[]).find((c) => c.type === 'Ready');

interface OperatorProcess {
  identity: string;
  proc: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
}

describe.skipIf(realApiServerMissing !== undefined)(
  'touchstone operator against a real Kubernetes API server and a real server',
  () => {
    let dir = '';
    let kube: RealKube;
    let touchstone: OperatorServer;
    let custom: CustomObjectsApi;
    let core: CoreV1Api;
    const operators: OperatorProcess[] = [];

    const startOperator = (identity: string): OperatorProcess => {
      const proc = spawn(
        process.execPath,
        [
          ...ENTRY,
          'operator',
          '--kubeconfig',
          kube.kubeconfigFile(),
          '--server',
          touchstone.server.base,
          '--lease-namespace',
          LEASE_NS,
          '--lease-duration',
          '3s',
          '--status-interval',
          '1s',
          '--timeout',
          '5s',
        ],
        {
          env: { ...process.env, [KEY_FIELD]: touchstone.key, POD_NAME: identity },
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      let stderr = '';
      proc.stderr?.on('data', (d) => {
        stderr += d;
      });
      const exited = new Promise<number | null>((resolve) => proc.on('close', resolve));
      const op = { identity, proc, stderr: () => stderr, exited };
      operators.push(op);
      return op;
    };

    const get = async (kind: keyof typeof plural, name: string): Promise<Json | undefined> => {
      try {
        return (await custom.getNamespacedCustomObject({
          group: 'touchstone.dev',
          version: 'v1alpha1',
          plural: plural[kind],
          namespace: NS,
          name,
        })) as Json;
      } catch (err) {
        if (kubeStatus(err) === 404) return undefined;
        throw err;
      }
    };
    const create = (body: Json, dryRun?: 'All') =>
      custom.createNamespacedCustomObject({
        group: 'touchstone.dev',
        version: 'v1alpha1',
        plural: plural[body.kind as keyof typeof plural] ?? `${String(body.kind).toLowerCase()}s`,
        namespace: NS,
        body,
        ...(dryRun === undefined ? {} : { dryRun }),
      });
    const until = <T>(check: () => Promise<T | undefined | false>, ms = 30_000) =>
      eventually(async () => (await check()) || undefined, ms);
    const readyWith = (kind: keyof typeof plural, name: string, reason: string) =>
      until(async () => {
        const o = await get(kind, name);
        return ready(o)?.reason === reason ? o : undefined;
      });
    const holder = async () => {
      const lease = await kube
        .config()
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace: LEASE_NS, name: 'touchstone-operator' })
        .catch(() => undefined);
      return lease?.spec?.holderIdentity;
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'touchstone-operator-real-'));
      kube = await RealKube.start();
      custom = kube.config().makeApiClient(CustomObjectsApi);
      core = kube.config().makeApiClient(CoreV1Api);
      await kube.createNamespace(NS);
      await kube.createNamespace(LEASE_NS);
      touchstone = await startOperatorServer(dir, NS);
    }, 180_000);

    afterAll(async () => {
      for (const op of operators) {
        if (op.proc.exitCode === null && op.proc.signalCode === null) op.proc.kill('SIGKILL');
        await op.exited;
      }
      await touchstone?.close();
      await kube?.close();
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    });

    it("accepts each of the chart's CRDs: structural schemas, printer columns, status subresource", async () => {
      const api = kube.config().makeApiClient(ApiextensionsV1Api);
      for (const file of chartCrds()) {
        const stored = await api.readCustomResourceDefinition({ name: file.metadata?.name ?? '' });
        const conditions = Object.fromEntries(
          (stored.status?.conditions ?? []).map((c) => [c.type, c.status]),
        );
        expect(conditions).toMatchObject({ Established: 'True', NamesAccepted: 'True' });
        expect(conditions.NonStructuralSchema).toBeUndefined();
        const [version] = stored.spec.versions;
        const [wanted] = file.spec.versions;
        expect(version?.additionalPrinterColumns).toEqual(wanted?.additionalPrinterColumns);
        expect(version?.subresources?.status).toEqual({});
      }
    });

    it('accepts every example custom resource (a server-side dry run)', async () => {
      const examples = readdirSync('deploy/examples').filter((f) => f.endsWith('.yaml'));
      expect(examples.length).toBeGreaterThanOrEqual(4);
      for (const file of examples) {
        const body = parse(readFileSync(join('deploy/examples', file), 'utf8')) as Json;
        await expect(create(body, 'All'), file).resolves.toBeDefined();
      }
    });

    it('refuses a custom resource that violates the OpenAPI schema, with the reasons', async () => {
      const bad = resource('TraceSource', 'bad', { connector: 'datadog', poll: { interval: 5 } });
      const err = await create(bad).catch((e: unknown) => e);
      expect(kubeStatus(err)).toBe(422);
      const message = kubeMessage(err);
      expect(message).toContain('spec.connector: Unsupported value: "datadog"');
      expect(message).toContain('spec.endpoint: Required value');
      expect(message).toContain('spec.poll.interval: Invalid value: "integer"');
      expect(await get('TraceSource', 'bad')).toBeUndefined();
    });

    it('two operator processes: one leads through a coordination.k8s.io Lease', async () => {
      const a = startOperator('operator-a');
      const b = startOperator('operator-b');
      const leader = await until(holder);
      expect(['operator-a', 'operator-b']).toContain(leader);
      // The other one keeps seeing a current lease and stays a follower.
      await new Promise((r) => setTimeout(r, 4000));
      expect(await holder()).toBe(leader);
      const leading = [a, b].filter((op) => op.stderr().includes('"msg":"leading"'));
      expect(leading.map((op) => op.identity)).toEqual([leader]);
    }, 60_000);

    it('a source naming a missing policy is admitted with a Warning Event, and syncs once the policy exists', async () => {
      await create(resource('TraceSource', 'prod-langfuse', touchstone.sourceSpec(['quality'])));
      const waiting = await readyWith('TraceSource', 'prod-langfuse', 'PolicyNotFound');
      expect(ready(waiting)).toMatchObject({ status: 'False' });
      expect(meta(waiting).finalizers).toEqual([FINALIZER]);
      const event = await until(async () => {
        const events = await core.listNamespacedEvent({
          namespace: NS,
          fieldSelector: 'involvedObject.name=prod-langfuse,reason=PolicyNotFound',
        });
        return events.items.find((e) => e.type === 'Warning');
      });
      expect(event.involvedObject).toMatchObject({ kind: 'TraceSource', namespace: NS });
      expect(event.involvedObject.uid).toBe(meta(waiting).uid);
      const onServer = `/v1alpha1/sources/prod-langfuse?project=${NS}`;
      expect((await touchstone.api('GET', onServer)).status).toBe(404);

      await create(
        resource('OnlineEvalPolicy', 'quality', {
          stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
        }),
      );
      await readyWith('OnlineEvalPolicy', 'quality', 'Synced');
      const synced = await readyWith('TraceSource', 'prod-langfuse', 'Synced');
      expect(statusOf(synced).observedGeneration).toBe(1);
      expect((await touchstone.api('GET', onServer)).status).toBe(200);
    }, 60_000);

    it('mirrors the source status onto the status subresource, shown in the printer columns', async () => {
      const source = await until(async () => {
        const o = await get('TraceSource', 'prod-langfuse');
        return Number(statusOf(o).pulled) >= 3 ? o : undefined;
      }, 60_000);
      const status = statusOf(source);
      expect(status.phase).toMatch(/^(backfilling|tailing)$/);
      expect(Date.parse(String(status.watermark))).toBeGreaterThan(0);
      // The operator writes status only: the spec's generation never moved.
      expect(meta(source).generation).toBe(1);
      const onServer = await touchstone.api('GET', `/v1alpha1/sources/prod-langfuse?project=${NS}`);
      expect((onServer.body.status as Json).pulled).toBe(status.pulled);

      // What `kubectl get tracesources` prints: the API server's table of the printer columns.
      const res = await kube.get(
        `/apis/touchstone.dev/v1alpha1/namespaces/${NS}/tracesources/prod-langfuse`,
        'application/json;as=Table;v=v1;g=meta.k8s.io',
      );
      const table = res as { columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
      const columns = table.columnDefinitions.map((c) => c.name);
      expect(columns).toEqual(['Name', 'Phase', 'Pulled', 'Scored', 'Watermark', 'Lag', 'Age']);
      const cells = table.rows[0]?.cells ?? [];
      expect(cells[0]).toBe('prod-langfuse');
      expect(cells[1]).toBe(status.phase);
      expect(Number(cells[2])).toBeGreaterThanOrEqual(3);
    }, 90_000);

    it('the other operator takes over when the leader stops, and goes on reconciling', async () => {
      const before = await holder();
      const leader = operators.find((op) => op.identity === before);
      leader?.proc.kill('SIGTERM');
      expect(await leader?.exited).toBe(0);
      const after = await until(async () => {
        const now = await holder();
        return now !== undefined && now !== '' && now !== before ? now : undefined;
      });
      expect(['operator-a', 'operator-b']).toContain(after);
      await create(
        resource('OnlineEvalPolicy', 'after-failover', {
          stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
        }),
      );
      await readyWith('OnlineEvalPolicy', 'after-failover', 'Synced');
    }, 60_000);

    it('deleting a TraceSource: the finalizer deletes the source on the server and keeps its traces', async () => {
      await custom.deleteNamespacedCustomObject({
        group: 'touchstone.dev',
        version: 'v1alpha1',
        plural: 'tracesources',
        namespace: NS,
        name: 'prod-langfuse',
      });
      await until(async () => (await get('TraceSource', 'prod-langfuse')) === undefined);
      const onServer = `/v1alpha1/sources/prod-langfuse?project=${NS}`;
      expect((await touchstone.api('GET', onServer)).status).toBe(404);
      const traces = (await touchstone.api('GET', `/v1alpha1/traces?project=${NS}`)).body;
      expect((traces.traces as Json[]).length).toBeGreaterThanOrEqual(3);
      for (const op of operators) expect(op.stderr()).not.toContain(touchstone.key);
    }, 60_000);

    it('refuses at admission what the server would refuse, with its message, through the webhook', async () => {
      const certs = makeCertificates(dir, ['127.0.0.1'], 'webhook');
      const webhook = await startTestWebhook({
        serverUrl: touchstone.server.base,
        apiKey: touchstone.key,
        certFile: certs.certFile,
        keyFile: certs.keyFile,
      });
      const admission = kube.config().makeApiClient(AdmissionregistrationV1Api);
      const name = 'touchstone-admission-test';
      try {
        await admission.createValidatingWebhookConfiguration({
          body: {
            metadata: { name },
            webhooks: [
              {
                name: 'validate.touchstone.dev',
                clientConfig: {
                  url: webhook.url,
                  caBundle: Buffer.from(certs.ca).toString('base64'),
                },
                rules: [
                  {
                    apiGroups: ['touchstone.dev'],
                    apiVersions: ['v1alpha1'],
                    operations: ['CREATE', 'UPDATE'],
                    resources: Object.values(plural),
                  },
                ],
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NS } },
                sideEffects: 'None',
                admissionReviewVersions: ['v1'],
                failurePolicy: 'Fail',
                timeoutSeconds: 10,
              },
            ],
          },
        });
        const bad = resource('OnlineEvalPolicy', 'bad-selector', {
          selector: 'trace.attributes[',
          stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
        });
        // The API server picks a new webhook configuration up within a moment: dry runs (which
        // call webhooks without side effects) until it refuses, then the real create.
        await until(
          async () => kubeStatus(await create(bad, 'All').catch((e: unknown) => e)) !== undefined,
        );
        const err = await create(bad).catch((e: unknown) => e);
        // The webhook answers with the status the server's API gave (400 for a bad selector).
        expect(kubeStatus(err)).toBe(400);
        const message = kubeMessage(err);
        expect(message).toContain('admission webhook "validate.touchstone.dev" denied the request');
        expect(message).toContain('POLICY_CEL_INVALID');
        expect(message).toMatch(/spec\.selector/);
        expect(await get('OnlineEvalPolicy', 'bad-selector')).toBeUndefined();
        // What the server accepts passes the same webhook.
        const good = resource('OnlineEvalPolicy', 'admitted', {
          stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
        });
        await expect(create(good)).resolves.toBeDefined();
      } finally {
        await admission.deleteValidatingWebhookConfiguration({ name }).catch(() => undefined);
        await webhook.admission.stop();
      }
    }, 60_000);
  },
);
