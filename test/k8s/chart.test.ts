import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as monitoring from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import * as admissionregistration from 'kubernetes-models/admissionregistration.k8s.io/v1';
import * as apiextensions from 'kubernetes-models/apiextensions.k8s.io/v1';
import * as apps from 'kubernetes-models/apps/v1';
import * as networking from 'kubernetes-models/networking.k8s.io/v1';
import * as rbac from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import * as core from 'kubernetes-models/v1';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/index.js';
import { admissionReview, postReview, startTestWebhook } from './admission-harness.js';
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

/**
 * cert-manager publishes no schema package here: its two kinds the chart renders are held to the
 * fields cert-manager requires.
 */
class CertManagerIssuer {
  constructor(private readonly data: { spec?: Json }) {}
  validate(): void {
    const types = ['selfSigned', 'ca', 'acme', 'vault', 'venafi'];
    if (!types.some((t) => this.data.spec?.[t] !== undefined))
      throw new Error('spec: no issuer type');
  }
}

class CertManagerCertificate {
  constructor(private readonly data: { spec?: Json }) {}
  validate(): void {
    const spec = (this.data.spec ?? {}) as {
      secretName?: unknown;
      issuerRef?: { name?: unknown };
      dnsNames?: unknown;
    };
    if (typeof spec.secretName !== 'string') throw new Error('spec.secretName is required');
    if (typeof spec.issuerRef?.name !== 'string')
      throw new Error('spec.issuerRef.name is required');
    if (!Array.isArray(spec.dnsNames) || spec.dnsNames.length === 0) {
      throw new Error('spec.dnsNames is required');
    }
  }
}

const MODELS: Record<string, Record<string, unknown>> = {
  v1: core,
  'apps/v1': apps,
  'networking.k8s.io/v1': networking,
  'rbac.authorization.k8s.io/v1': rbac,
  'apiextensions.k8s.io/v1': apiextensions,
  'admissionregistration.k8s.io/v1': admissionregistration,
  'monitoring.coreos.com/v1': monitoring,
  'cert-manager.io/v1': { Issuer: CertManagerIssuer, Certificate: CertManagerCertificate },
};

const CERT_MANAGER_APIS = ['--api-versions', 'cert-manager.io/v1/Certificate'];

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
  'cert-manager': ['-f', 'test/k8s/values/cert-manager.yaml', ...CERT_MANAGER_APIS],
};

/** The chart generates a new CA and certificate at every render: golden files show a placeholder. */
function withoutGeneratedKeys(text: string): string {
  return text.replace(/^(\s*(?:tls\.crt|tls\.key|ca\.crt|caBundle): ).+$/gm, '$1<generated>');
}

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
        ...flags.filter((f) => !f.startsWith('--api') && !/^(monitoring|cert-manager)\./.test(f)),
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
      await expect(withoutGeneratedKeys(text)).toMatchFileSnapshot(`golden/${set}.yaml`);
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
    // Then the admission webhook's flags (tested below).
    expect(container.args.slice(0, container.args.indexOf('--admission-listen'))).toEqual([
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

  it('the admission webhook: a ValidatingWebhookConfiguration for the four kinds, served by the operator', () => {
    const { objects } = rendering('operator');
    const config = find(objects, 'ValidatingWebhookConfiguration') as {
      metadata: Json;
      webhooks: Json[];
    };
    expect(config.metadata.name).toBe('ts-touchstone-admission-evals');
    expect(config.webhooks).toHaveLength(1);
    const hook = config.webhooks[0] as Json & { clientConfig: { caBundle: string } };
    expect(hook).toMatchObject({
      name: 'resources.touchstone.dev',
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      failurePolicy: 'Fail',
      timeoutSeconds: 10,
      clientConfig: {
        service: {
          name: 'ts-touchstone-admission',
          namespace: 'evals',
          path: '/validate',
          port: 443,
        },
      },
      rules: [
        {
          apiGroups: ['touchstone.dev'],
          apiVersions: ['v1alpha1'],
          operations: ['CREATE', 'UPDATE'],
          resources: ['tracesources', 'onlineevalpolicies', 'evalruns', 'webhooks'],
          scope: 'Namespaced',
        },
      ],
      // Only the namespace the operator watches.
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'support' } },
    });
    const service = find(objects, 'Service', 'ts-touchstone-admission') as { spec: Json };
    expect(service.spec.selector).toMatchObject({ 'app.kubernetes.io/component': 'operator' });
    expect(service.spec.ports).toEqual([
      { name: 'https', port: 443, targetPort: 'admission', protocol: 'TCP' },
    ]);
    const pod = (
      find(objects, 'Deployment', 'ts-touchstone-operator') as {
        spec: { template: { spec: Json } };
      }
    ).spec.template.spec;
    const container = (pod.containers as Json[])[0] as Json & { args: string[] };
    expect(container.args.slice(container.args.indexOf('--admission-listen'))).toEqual([
      '--admission-listen',
      ':8443',
      '--tls-cert-file',
      '/var/run/touchstone/admission/tls.crt',
      '--tls-key-file',
      '/var/run/touchstone/admission/tls.key',
      '--admission-failure-policy',
      'Fail',
      '--admission-timeout',
      '8s',
    ]);
    expect(container.ports).toEqual([{ name: 'admission', containerPort: 8443, protocol: 'TCP' }]);
    expect(container.volumeMounts).toContainEqual({
      name: 'admission-tls',
      mountPath: '/var/run/touchstone/admission',
      readOnly: true,
    });
    expect(pod.volumes).toContainEqual({
      name: 'admission-tls',
      secret: { secretName: 'ts-touchstone-admission-tls' },
    });
    // Off: no webhook, and the operator serves none.
    const off = render(['-f', 'test/k8s/values/operator.yaml', '--set', 'admission.enabled=false']);
    expect(off.objects.some((o) => o.kind === 'ValidatingWebhookConfiguration')).toBe(false);
    expect(off.text).not.toContain('--admission-listen');
  });

  it('generates a CA and a certificate for the webhook Service that the webhook serves and the caBundle trusts', async () => {
    const { objects } = rendering('operator');
    const secret = find(objects, 'Secret', 'ts-touchstone-admission-tls') as {
      type: string;
      data: Record<string, string>;
    };
    expect(secret.type).toBe('kubernetes.io/tls');
    const pem = (k: string) => Buffer.from(secret.data[k] ?? '', 'base64').toString('utf8');
    const hook = (find(objects, 'ValidatingWebhookConfiguration') as { webhooks: Json[] })
      .webhooks[0] as { clientConfig: { caBundle: string } };
    expect(hook.clientConfig.caBundle).toBe(secret.data['ca.crt']);
    const cert = new X509Certificate(pem('tls.crt'));
    const ca = new X509Certificate(pem('ca.crt'));
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.subjectAltName).toBe(
      'DNS:ts-touchstone-admission.evals.svc, DNS:ts-touchstone-admission.evals.svc.cluster.local',
    );
    expect(Date.parse(cert.validTo) - Date.now()).toBeGreaterThan(3000 * 86_400_000);
    // The webhook serves this pair; a client trusting only the caBundle accepts it by the
    // Service's name, as the API server does.
    writeFileSync(join(scratch, 'chart-tls.crt'), pem('tls.crt'));
    writeFileSync(join(scratch, 'chart-tls.key'), pem('tls.key'));
    const webhook = await startTestWebhook({
      serverUrl: 'http://127.0.0.1:9',
      certFile: join(scratch, 'chart-tls.crt'),
      keyFile: join(scratch, 'chart-tls.key'),
    });
    try {
      const review = admissionReview('uid-chart', 'DELETE', null, {
        kind: 'TraceSource',
        metadata: { name: 'x', namespace: 'support' },
      });
      const res = await postReview(webhook.url, pem('ca.crt'), review, {
        servername: 'ts-touchstone-admission.evals.svc',
      });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text).response).toEqual({ uid: 'uid-chart', allowed: true });
    } finally {
      await webhook.admission.stop();
    }
  });

  it('with cert-manager: an Issuer or the one named, a Certificate, and the CA injected by annotation', () => {
    const { objects } = rendering('cert-manager');
    expect(objects.some((o) => o.metadata.name === 'ts-touchstone-admission-tls')).toBe(false);
    expect(objects.some((o) => o.kind === 'Issuer')).toBe(false);
    const certificate = find(objects, 'Certificate', 'ts-touchstone-admission') as { spec: Json };
    expect(certificate.spec).toEqual({
      secretName: 'ts-touchstone-admission-tls',
      dnsNames: [
        'ts-touchstone-admission.evals.svc',
        'ts-touchstone-admission.evals.svc.cluster.local',
      ],
      issuerRef: { group: 'cert-manager.io', name: 'internal-ca', kind: 'ClusterIssuer' },
    });
    const config = find(objects, 'ValidatingWebhookConfiguration') as {
      metadata: { annotations: Json };
      webhooks: (Json & { clientConfig: Json })[];
    };
    expect(config.metadata.annotations).toEqual({
      'cert-manager.io/inject-ca-from': 'evals/ts-touchstone-admission',
    });
    expect(config.webhooks[0]?.clientConfig.caBundle).toBeUndefined();
    expect(config.webhooks[0]).toMatchObject({ failurePolicy: 'Ignore', timeoutSeconds: 5 });
    expect(config.webhooks[0]?.namespaceSelector).toBeUndefined();
    // No issuer named: a self-signed Issuer of its own.
    const own = render([
      '-f',
      'test/k8s/values/cert-manager.yaml',
      '--set',
      'admission.certManager.issuerRef.name=',
      '--set',
      'admission.certManager.issuerRef.kind=Issuer',
      ...CERT_MANAGER_APIS,
    ]);
    expect(find(own.objects, 'Issuer', 'ts-touchstone-admission-selfsigned').spec).toEqual({
      selfSigned: {},
    });
    expect((find(own.objects, 'Certificate') as { spec: Json }).spec.issuerRef).toEqual({
      group: 'cert-manager.io',
      name: 'ts-touchstone-admission-selfsigned',
      kind: 'Issuer',
    });
    const without = helm(['template', 'ts', CHART, '-f', 'test/k8s/values/cert-manager.yaml']);
    expect(without.status).not.toBe(0);
    expect(without.stderr).toContain(
      'admission.certManager.enabled requires the cert-manager.io/v1 API',
    );
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
    [['--set', 'admission.failurePolicy=Maybe'], "at '/admission/failurePolicy'"],
    [['--set', 'admission.timeoutSeconds=60'], "at '/admission/timeoutSeconds'"],
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
