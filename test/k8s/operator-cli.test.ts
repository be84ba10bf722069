import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, ENTRY, eventually, freePort } from '../support/process.js';
import { admissionReview, makeCertificates, postReview } from './admission-harness.js';
import { FakeKube } from './fake-kube.js';

/**
 * `touchstone operator` as a process against the fake Kubernetes API, with no Touchstone server
 * listening: it leads, reports what blocks each resource as a condition, and on SIGTERM exits 0
 * and hands its Lease back.
 */

type Json = Record<string, unknown>;
const KEY = 'ts_operator-key-never-printed-0123456789';

describe('touchstone operator (the command)', () => {
  let dir = '';
  let kube: FakeKube;
  let kubeconfig = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-operator-cli-'));
    kube = await FakeKube.start();
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, kube.kubeconfig());
  });
  afterAll(async () => {
    await kube?.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('refuses to start without a server to talk to', () => {
    const r = cli(['operator', '--kubeconfig', kubeconfig], { TOUCHSTONE_SERVER: '' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('give the Touchstone server: --server URL or TOUCHSTONE_SERVER');
  });

  it('refuses to serve the admission webhook without TLS', () => {
    const r = cli([
      'operator',
      '--kubeconfig',
      kubeconfig,
      '--server',
      'http://127.0.0.1:9',
      '--admission-listen',
      ':8443',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--admission-listen needs --tls-cert-file and --tls-key-file');
  });

  it('reports an unreachable server and a missing Secret as conditions, its webhook refuses what it cannot check; SIGTERM hands the Lease back', async () => {
    const certs = makeCertificates(dir);
    const admissionPort = await freePort();
    const proc = spawn(
      process.execPath,
      [
        ...ENTRY,
        'operator',
        '--kubeconfig',
        kubeconfig,
        '--server',
        'http://127.0.0.1:9',
        '--lease-namespace',
        'ops',
        '--lease-duration',
        '2s',
        '--timeout',
        '2s',
        '--admission-listen',
        `127.0.0.1:${admissionPort}`,
        '--tls-cert-file',
        certs.certFile,
        '--tls-key-file',
        certs.keyFile,
        '--admission-timeout',
        '2s',
      ],
      { env: { ...process.env, TOUCHSTONE_API_KEY: KEY }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    proc.stderr.on('data', (d) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((resolve) => proc.on('close', resolve));
    const meta = { namespace: 'support', labels: { 'touchstone.dev/project': 'support' } };
    kube.apply('touchstone.dev/webhooks', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'Webhook',
      metadata: { name: 'ci', ...meta },
      spec: {
        url: 'https://ci.example.com/h',
        events: ['run.finished'],
        secretRef: { name: 'hook', key: 'secret' },
      },
    });
    kube.apply('touchstone.dev/onlineevalpolicies', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'quality', ...meta },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    });
    const reason = (collection: string, name: string) => {
      const o = kube.get(collection, 'support', name);
      const conditions = ((o?.status as Json | undefined)?.conditions ?? []) as Json[];
      return conditions[0]?.reason;
    };
    await eventually(
      async () =>
        reason('touchstone.dev/webhooks', 'ci') === 'SecretMissing' &&
        reason('touchstone.dev/onlineevalpolicies', 'quality') === 'ServerUnreachable'
          ? true
          : undefined,
      30_000,
    );
    const lease = () => kube.get('coordination.k8s.io/leases', 'ops', 'touchstone-operator');
    expect((lease()?.spec as Json | undefined)?.holderIdentity).not.toBe('');

    // The command serves the webhook too: the server being away, it refuses (failurePolicy Fail).
    const review = admissionReview('uid-cli', 'CREATE', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'quality', ...meta },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    });
    const answer = await postReview(
      `https://127.0.0.1:${admissionPort}/validate`,
      certs.ca,
      review,
    );
    expect(JSON.parse(answer.text).response).toMatchObject({
      uid: 'uid-cli',
      allowed: false,
      status: { code: 503 },
    });

    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect((lease()?.spec as Json | undefined)?.holderIdentity).toBe('');
    // Nothing was deleted while the server was away.
    expect(kube.get('touchstone.dev/onlineevalpolicies', 'support', 'quality')).toBeDefined();
    expect(stderr).toContain('"msg":"leading"');
    expect(stderr).toContain('"msg":"admission webhook listening"');
    expect(stderr).not.toContain(KEY);
  }, 60_000);
});
