import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  KubeConfig,
  loadYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { CHART_DIR } from '../../scripts/gen-k8s.js';
import { eventually, freePort } from '../support/process.js';

/**
 * A real Kubernetes API server for the operator's tests: Debian's etcd and a kube-apiserver
 * built from the Go modules in test/k8s/apiserver (`.ci/run` builds it, cached outside the
 * clone, and exports TOUCHSTONE_KUBE_APISERVER). Both listen on loopback ports in a temp dir;
 * the chart's CRDs are installed before the tests see it. Authentication is a static token:
 * `admin` is in system:masters, and the API server authorizes with RBAC as a cluster does.
 */

const APISERVER = process.env.TOUCHSTONE_KUBE_APISERVER ?? '';
const ETCD = process.env.TOUCHSTONE_ETCD ?? '/usr/bin/etcd';

/** Why the tier cannot run here, or undefined when it can. */
export const realApiServerMissing: string | undefined =
  APISERVER === '' || !existsSync(APISERVER)
    ? 'no kube-apiserver: build it with `bash -c "source .ci/run && setup_kube_apiserver"` and export the TOUCHSTONE_KUBE_APISERVER it prints'
    : !existsSync(ETCD)
      ? `no etcd at ${ETCD}: \`apt-get install etcd-server\` or set TOUCHSTONE_ETCD`
      : undefined;

interface Child {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<void>;
}

function launch(command: string, args: string[]): Child {
  const proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  // Only the tail is kept: enough to say why a start failed.
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  return { proc, output: () => out, exited };
}

async function stop(child: Child | undefined): Promise<void> {
  if (child === undefined || child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill('SIGTERM');
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 10_000);
  await child.exited;
  clearTimeout(timer);
}

/** GET with a bearer token, not checking the server's self-signed certificate; status 0: no answer. */
function httpsGet(
  url: string,
  token: string,
  accept = 'application/json',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        headers: { authorization: `Bearer ${token}`, accept },
        rejectUnauthorized: false,
        timeout: 5000,
      },
      (res) => {
        let body = '';
        res.on('data', (d) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/**
 * The chart's CustomResourceDefinitions, read into the client's typed model: it sends only the
 * fields it knows by their TypeScript names, so a plain parse would lose every `x-kubernetes-*`.
 */
export function chartCrds(): V1CustomResourceDefinition[] {
  const dir = join(CHART_DIR, 'crds');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => loadYaml<V1CustomResourceDefinition>(readFileSync(join(dir, f), 'utf8')));
}

export class RealKube {
  private constructor(
    private readonly dir: string,
    readonly url: string,
    private readonly token: string,
    private readonly etcd: Child,
    private readonly apiserver: Child,
  ) {}

  /** Starts etcd and the API server, waits until it is ready and installs the chart's CRDs. */
  static async start(): Promise<RealKube> {
    if (realApiServerMissing !== undefined) throw new Error(realApiServerMissing);
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-kube-'));
    const [etcdPort, peerPort, port] = [await freePort(), await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const etcd = launch(ETCD, [
      `--data-dir=${join(dir, 'etcd')}`,
      '--name=touchstone-test',
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=touchstone-test=${peerUrl}`,
    ]);

    // One user, in system:masters, for the tests and the operator.
    const token = randomBytes(24).toString('hex');
    writeFileSync(join(dir, 'tokens.csv'), `${token},admin,admin,"system:masters"\n`);
    // Service account tokens are signed with a key the API server insists on, though no test
    // uses one.
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
    writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

    const apiserver = launch(APISERVER, [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${join(dir, 'certs')}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-cluster-ip-range=10.96.0.0/24',
      // Nothing here runs Services' endpoints or shares the load between API servers.
      '--endpoint-reconciler-type=none',
      '--enable-priority-and-fairness=false',
      '--profiling=false',
    ]);
    const kube = new RealKube(dir, `https://127.0.0.1:${port}`, token, etcd, apiserver);
    try {
      await eventually(async () => {
        if (apiserver.proc.exitCode !== null || etcd.proc.exitCode !== null) {
          throw new Error(`did not start:\n${etcd.output()}\n${apiserver.output()}`);
        }
        const { status } = await httpsGet(`${kube.url}/readyz`, token);
        return status === 200 ? true : undefined;
      }, 120_000);
      await kube.installCrds();
    } catch (err) {
      await kube.close();
      throw err;
    }
    return kube;
  }

  /** A kubeconfig for the admin: a static token, TLS not verified. */
  kubeconfig(): string {
    return [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: test, cluster: {server: "${this.url}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: admin, user: {token: "${this.token}"}}]`,
      `contexts: [{name: test, context: {cluster: test, user: admin}}]`,
      'current-context: test',
      '',
    ].join('\n');
  }

  /** The kubeconfig written to a file in the temp dir; returns its path. */
  kubeconfigFile(): string {
    const file = join(this.dir, 'admin.kubeconfig');
    writeFileSync(file, this.kubeconfig());
    return file;
  }

  config(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromString(this.kubeconfig());
    return kc;
  }

  async createNamespace(name: string): Promise<void> {
    await this.config()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name } } });
  }

  /** Creates every CRD of the chart and waits until the API server serves each. */
  private async installCrds(): Promise<void> {
    const api = this.config().makeApiClient(ApiextensionsV1Api);
    for (const body of chartCrds()) await api.createCustomResourceDefinition({ body });
    for (const { metadata } of chartCrds()) {
      await eventually(async () => {
        const crd = await api.readCustomResourceDefinition({ name: metadata?.name ?? '' });
        const established = crd.status?.conditions?.find((c) => c.type === 'Established');
        return established?.status === 'True' ? true : undefined;
      }, 30_000);
    }
  }

  /** A GET that must answer 200 (e.g. a Table, which the typed clients do not ask for). */
  async get(path: string, accept?: string): Promise<unknown> {
    const { status, body } = await httpsGet(`${this.url}${path}`, this.token, accept);
    if (status !== 200) throw new Error(`GET ${path}: HTTP ${status} ${body.slice(0, 500)}`);
    return JSON.parse(body);
  }

  async close(): Promise<void> {
    await stop(this.apiserver);
    await stop(this.etcd);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
