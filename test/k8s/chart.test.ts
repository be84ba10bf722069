import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as monitoring from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import * as apiextensions from 'kubernetes-models/apiextensions.k8s.io/v1';
import * as apps from 'kubernetes-models/apps/v1';
import * as networking from 'kubernetes-models/networking.k8s.io/v1';
import * as rbac from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import * as core from 'kubernetes-models/v1';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/index.js';
import { CHART, helm, type K8sObject, render } from './helm.js';

/**
 * The Helm chart, rendered offline by helm itself (helm lint --strict, helm template) over the
 * value sets in values/: every object checked against the Kubernetes schemas (kubernetes-models,
 * the Prometheus operator's for its kinds), compared with the golden files in golden/
 * (`npx vitest run test/k8s/chart.test.ts -u` rewrites them after a deliberate change), and the
 * rendered server config loaded by the server's own config loader.
 */

type Json = { [key: string]: unknown };
type Validatable = new (data: unknown) => { validate(): void };

const MODELS: Record<string, Record<string, unknown>> = {
  v1: core,
  'apps/v1': apps,
  'networking.k8s.io/v1': networking,
  'rbac.authorization.k8s.io/v1': rbac,
  'apiextensions.k8s.io/v1': apiextensions,
  'monitoring.coreos.com/v1': monitoring,
};

const MONITORING_APIS = [
  '--api-versions',
  'monitoring.coreos.com/v1/PrometheusRule',
  '--api-versions',
  'monitoring.coreos.com/v1/ServiceMonitor',
];

const SETS: Record<string, string[]> = {
  default: [],
  sqlite: ['-f', 'test/k8s/values/sqlite.yaml'],
  postgres: ['-f', 'test/k8s/values/postgres.yaml'],
  'bundled-postgres': ['-f', 'test/k8s/values/bundled-postgres.yaml'],
  egress: ['-f', 'test/k8s/values/egress.yaml'],
  monitoring: ['-f', 'test/k8s/values/monitoring.yaml', ...MONITORING_APIS],
  operator: ['-f', 'test/k8s/values/operator.yaml'],
};

const rendered = new Map<string, ReturnType<typeof render>>();
function rendering(set: string) {
  let r = rendered.get(set);
  if (r === undefined) {
    r = render(SETS[set] ?? []);
    rendered.set(set, r);
  }
  return r;
}

function validateObject(o: K8sObject): void {
  const Model = MODELS[o.apiVersion]?.[o.kind] as Validatable | undefined;
  if (Model === undefined) throw new Error(`no schema for ${o.apiVersion} ${o.kind}`);
  new Model(o).validate();
}

function find(objects: K8sObject[], kind: string, name?: string): Json {
  const o = objects.find(
    (x) => x.kind === kind && (name === undefined || x.metadata.name === name),
  );
  if (o === undefined) throw new Error(`no ${kind} ${name ?? ''}`);
  return o as Json;
}

function podSpec(objects: K8sObject[]): Json {
  const deployment = find(objects, 'Deployment') as { spec: { template: { spec: Json } } };
  return deployment.spec.template.spec;
}

function server(objects: K8sObject[]): Json {
  return (podSpec(objects).containers as Json[])[0] as Json;
}

const scratch = mkdtempSync(join(tmpdir(), 'touchstone-chart-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The rendered config.yaml, loaded as the server loads it, with the pod's environment. */
function serverConfig(objects: K8sObject[], env: Record<string, string> = {}) {
  const text = (find(objects, 'ConfigMap') as { data: { 'config.yaml': string } }).data[
    'config.yaml'
  ];
  const file = join(scratch, `config-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, text);
  return { text, config: loadConfig({ file, env }) };
}

describe('Helm chart', () => {
  it('passes helm lint --strict with the default values and every value set', () => {
    for (const [set, flags] of Object.entries(SETS)) {
      // helm lint has no --api-versions, and reports a template's `fail` only as information:
      // the monitoring templates' API check is tested with helm template below.
      const res = helm([
        'lint',
        '--strict',
        CHART,
        ...flags.filter((f) => !f.startsWith('--api') && !f.startsWith('monitoring.')),
      ]);
      expect(res.status, `${set}: ${res.stdout}${res.stderr}`).toBe(0);
    }
  });

  it.each(Object.keys(SETS))(
    'renders valid Kubernetes objects (%s) matching the golden file',
    async (set) => {
      const { text, objects } = rendering(set);
      expect(objects.length).toBeGreaterThan(0);
      for (const o of objects) {
        expect(() => validateObject(o), `${o.kind} ${o.metadata.name}`).not.toThrow();
      }
      await expect(text).toMatchFileSnapshot(`golden/${set}.yaml`);
    },
  );

  it('installs the four CRDs from crds/ (helm template --include-crds), schema-valid', () => {
    const { objects } = render(['--include-crds']);
    const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([
      'evalruns.touchstone.dev',
      'onlineevalpolicies.touchstone.dev',
      'tracesources.touchstone.dev',
      'webhooks.touchstone.dev',
    ]);
    for (const c of crds) expect(() => validateObject(c)).not.toThrow();
  });

  it('by default: SQLite, one replica, a kept volume, probes on the health endpoints, non-root and read-only', () => {
    const { objects } = rendering('default');
    const deployment = find(objects, 'Deployment') as { spec: Json };
    expect(deployment.spec.replicas).toBe(1);
    expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
    const pvc = find(objects, 'PersistentVolumeClaim') as { metadata: Json };
    expect(pvc.metadata.annotations).toMatchObject({ 'helm.sh/resource-policy': 'keep' });
    const c = server(objects);
    expect(c.startupProbe).toMatchObject({ httpGet: { path: '/healthz' } });
    expect(c.livenessProbe).toMatchObject({ httpGet: { path: '/healthz' } });
    expect(c.readinessProbe).toMatchObject({ httpGet: { path: '/readyz' } });
    expect(c.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(podSpec(objects).securityContext).toMatchObject({ runAsNonRoot: true });
    expect(c.image).toBe('touchstone:0.1.0');
    const { config } = serverConfig(objects);
    expect(config.store.driver).toBe('sqlite');
    expect(config.listen).toBe('0.0.0.0:4318');
    expect(config.auth).toBeDefined();
    // Nothing the chart does not need: no PostgreSQL, no monitoring, no egress policy.
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'ClusterRole',
      'ClusterRole',
      'ClusterRole',
      'ConfigMap',
      'Deployment',
      'PersistentVolumeClaim',
      'Service',
      'ServiceAccount',
    ]);
  });

  it('puts redaction, allowHosts, grants and webhooks into the one config every replica reads', () => {
    const { objects } = rendering('sqlite');
    const { config } = serverConfig(objects);
    expect(config.traces.redaction.keys).toEqual(['*_session_id']);
    expect(config.traces.redaction.pii).toEqual(['email']);
    expect(config.sources.allow_hosts).toEqual(['*.svc.cluster.local']);
    expect(config.sources.dir).toBe('/var/run/touchstone/sources');
    expect(config.credentials.grants).toEqual([
      { env: 'file:langfuse/keys', projects: ['support'], hosts: ['cloud.langfuse.com'] },
    ]);
    expect(config.webhooks.allow_hosts).toEqual(['hooks.internal']);
    expect(config.webhooks.max_attempts).toBe(8);
    // A config change restarts every replica (the pod template carries its checksum).
    const other = rendering('default');
    const checksum = (o: K8sObject[]) =>
      (find(o, 'Deployment') as { spec: { template: { metadata: { annotations: Json } } } }).spec
        .template.metadata.annotations['checksum/config'];
    expect(checksum(objects)).not.toBe(checksum(other.objects));
  });

  it('mounts each sources.secrets Secret under sources.dir/<secret>', () => {
    const { objects } = rendering('sqlite');
    const mounts = server(objects).volumeMounts as Json[];
    const volumes = podSpec(objects).volumes as Json[];
    for (const secret of ['langfuse', 'mlflow.tokens']) {
      const volume = volumes.find((v) => (v.secret as Json | undefined)?.secretName === secret);
      expect(volume, secret).toBeDefined();
      expect(mounts).toContainEqual({
        name: volume?.name,
        mountPath: `/var/run/touchstone/sources/${secret}`,
        readOnly: true,
      });
    }
  });

  it('on PostgreSQL: several replicas, the connection string from its Secret, no volume claim', () => {
    const { objects } = rendering('postgres');
    const deployment = find(objects, 'Deployment') as { spec: Json };
    expect(deployment.spec.replicas).toBe(3);
    expect(deployment.spec.strategy).toBeUndefined();
    expect(objects.some((o) => o.kind === 'PersistentVolumeClaim')).toBe(false);
    expect(server(objects).env).toContainEqual({
      name: 'TOUCHSTONE_STORE__URL',
      valueFrom: { secretKeyRef: { name: 'touchstone-db', key: 'url' } },
    });
    const { text, config } = serverConfig(objects, {
      TOUCHSTONE_STORE__URL: 'postgres://touchstone@db:5432/touchstone',
    });
    expect(config.store.driver).toBe('postgres');
    expect(text).not.toContain('postgres://');
    expect(config.traces.redaction.patterns).toEqual(['ACME-[0-9]{8}']);
  });

  it('the bundled PostgreSQL (trials) runs beside the server, its password in a Secret', () => {
    const { objects } = rendering('bundled-postgres');
    const statefulSet = find(objects, 'StatefulSet', 'ts-touchstone-postgresql');
    expect(statefulSet).toBeDefined();
    const env = server(objects).env as Json[];
    expect(env).toContainEqual({
      name: 'TOUCHSTONE_STORE__URL',
      value: 'postgres://touchstone@ts-touchstone-postgresql:5432/touchstone',
    });
    expect(env).toContainEqual({
      name: 'PGPASSWORD',
      valueFrom: { secretKeyRef: { name: 'ts-touchstone-postgresql', key: 'password' } },
    });
    const { config } = serverConfig(objects, { TOUCHSTONE_STORE__URL: 'postgres://x@y/z' });
    expect(config.store.driver).toBe('postgres');
  });

  it('egress policy: DNS and the release namespace only, then the extra rules', () => {
    expect(rendering('default').objects.some((o) => o.kind === 'NetworkPolicy')).toBe(false);
    const policy = find(rendering('egress').objects, 'NetworkPolicy') as { spec: Json };
    expect(policy.spec.policyTypes).toEqual(['Egress']);
    expect(policy.spec.egress).toEqual([
      {
        ports: [
          { port: 53, protocol: 'UDP' },
          { port: 53, protocol: 'TCP' },
        ],
      },
      { to: [{ podSelector: {} }] },
      { to: [{ ipBlock: { cidr: '203.0.113.0/24' } }], ports: [{ port: 443, protocol: 'TCP' }] },
    ]);
  });

  it('PrometheusRule: lag alert at sourceLagSeconds (default 120) and a failing-source alert', () => {
    const { objects } = rendering('monitoring');
    const rule = find(objects, 'PrometheusRule') as { spec: { groups: { rules: Json[] }[] } };
    const rules = rule.spec.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => [r.alert, r.expr])).toEqual([
      ['TouchstoneSourceLagging', 'touchstone_source_lag_seconds > 120'],
      ['TouchstoneSourceFailing', 'touchstone_source_failing == 1'],
    ]);
    const custom = render([
      '--set',
      'prometheusRule.enabled=true',
      '--set',
      'prometheusRule.sourceLagSeconds=300',
      ...MONITORING_APIS,
    ]);
    const lag = (find(custom.objects, 'PrometheusRule') as typeof rule).spec.groups[0]?.rules[0];
    expect(lag?.expr).toBe('touchstone_source_lag_seconds > 300');
    const monitor = find(objects, 'ServiceMonitor') as { spec: { endpoints: Json[] } };
    expect(monitor.spec.endpoints[0]).toMatchObject({
      path: '/metrics',
      authorization: {
        type: 'Bearer',
        credentials: { name: 'touchstone-metrics', key: 'api-key' },
      },
    });
  });

  it('the operator: its own API key, leader Lease in the release namespace, RBAC bound where it watches', () => {
    const { objects } = rendering('operator');
    const deployment = find(objects, 'Deployment', 'ts-touchstone-operator') as {
      spec: { replicas: number; template: { spec: Json } };
    };
    expect(deployment.spec.replicas).toBe(2);
    const pod = deployment.spec.template.spec;
    expect(pod.serviceAccountName).toBe('ts-touchstone-operator');
    const container = (pod.containers as Json[])[0] as { args: string[]; env: Json[] };
    expect(container.args).toEqual([
      'operator',
      '--server',
      'http://ts-touchstone.evals.svc:4318',
      '--namespace',
      'support',
      '--lease-namespace',
      'evals',
      '--lease-name',
      'ts-touchstone-operator',
      '--lease-duration',
      '15s',
      '--resync',
      '5m',
      '--status-interval',
      '30s',
    ]);
    expect(container.env).toContainEqual({
      name: 'TOUCHSTONE_API_KEY',
      valueFrom: { secretKeyRef: { name: 'touchstone-operator-key', key: 'api-key' } },
    });
    expect(find(objects, 'RoleBinding', 'ts-touchstone-operator').metadata).toMatchObject({
      namespace: 'support',
    });
    const rules = find(objects, 'ClusterRole', 'ts-touchstone-operator').rules as Json[];
    expect(rules).toContainEqual({
      apiGroups: ['touchstone.dev'],
      resources: [
        'tracesources/status',
        'onlineevalpolicies/status',
        'evalruns/status',
        'webhooks/status',
      ],
      verbs: ['get', 'patch', 'update'],
    });
    expect(find(objects, 'Role', 'ts-touchstone-operator-leader').rules).toEqual([
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'create', 'update'],
      },
    ]);
    // The server's own Deployment is unchanged, and its selector does not take the operator's pods.
    const selector = (
      find(objects, 'Deployment', 'ts-touchstone') as {
        spec: { selector: { matchLabels: Json } };
      }
    ).spec.selector.matchLabels;
    expect(selector['app.kubernetes.io/component']).toBe('server');
    expect(
      rendering('default').objects.some((o) => o.metadata.name === 'ts-touchstone-operator'),
    ).toBe(false);
  });

  it('refuses the Prometheus objects on a cluster without the Prometheus operator API', () => {
    const res = helm(['template', 'ts', CHART, '--set', 'prometheusRule.enabled=true']);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain(
      'prometheusRule.enabled requires the monitoring.coreos.com/v1 API',
    );
  });

  it.each([
    [['--set', 'replicaCount=two'], "at '/replicaCount'"],
    [['--set', 'prometheusRule.sourceLagSeconds=abc'], "at '/prometheusRule/sourceLagSeconds'"],
    [['--set', 'unknownKey=1'], 'additional properties'],
    [['--set', 'server.config.store.driver=mysql'], "at '/server/config/store/driver'"],
    [['--set', 'server.config.log_levle=info'], 'log_levle'],
    [['--set', 'sources.secrets[0]=Bad_Name'], "at '/sources/secrets/0'"],
    [['--set', 'replicaCount=3'], 'replicaCount > 1 needs PostgreSQL'],
    [['--set', 'postgresql.bundled.enabled=true'], 'postgresql.bundled needs password'],
    [
      [
        '--set',
        'postgresql.bundled.enabled=true',
        '--set',
        'postgresql.bundled.password=x',
        '--set',
        'postgresql.external.existingSecret=db',
      ],
      'are exclusive',
    ],
    [
      [
        '--set',
        'serviceMonitor.enabled=true',
        '--api-versions',
        'monitoring.coreos.com/v1/ServiceMonitor',
      ],
      'needs serviceMonitor.authorization.secretName',
    ],
    [['--set', 'operator.enabled=true'], 'needs operator.apiKey.secretName'],
    [['--set', 'operator.resync=often'], "at '/operator/resync'"],
  ])('refuses bad values %j', (flags, message) => {
    const res = helm(['template', 'ts', CHART, ...flags]);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain(message);
  });

  it('documents every value in the chart README', () => {
    const values = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Json;
    const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
    const missing = keyPaths(values).filter((p) => !readme.includes(`\`${p}\``));
    expect(missing).toEqual([]);
  });
});

/** Every key of the values, down to leaves and to maps or lists left empty for the user. */
function keyPaths(node: Json, prefix = ''): string[] {
  return Object.entries(node).flatMap(([k, v]) => {
    const path = prefix === '' ? k : `${prefix}.${k}`;
    const nested =
      typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length > 0;
    // Passed-through Kubernetes objects (resources, security contexts) are documented whole.
    return nested && !PASSED_THROUGH.has(path) ? keyPaths(v as Json, path) : [path];
  });
}

const PASSED_THROUGH = new Set([
  'server.config',
  'server.resources',
  'server.podSecurityContext',
  'server.securityContext',
  'operator.resources',
]);
