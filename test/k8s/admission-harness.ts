import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { type RunningAdmission, startAdmission } from '../../src/operator/admission.js';
import { KINDS, type KindName } from '../../src/operator/kinds.js';
import { TouchstoneClient } from '../../src/operator/server-client.js';

/**
 * The admission webhook for tests: certificates made with openssl (a CA, and a serving
 * certificate it signs for the given names), the webhook started in process with them, and a
 * client posting reviews over HTTPS that trusts only that CA. A test tier with a real API server
 * starts the webhook the same way and points a ValidatingWebhookConfiguration at it.
 */

export interface TestCertificates {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** The CA certificate (PEM), for a client or a webhook configuration's caBundle. */
  ca: string;
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

/** A CA and a certificate it signs for `names` (DNS names or IP addresses), written under `dir`. */
export function makeCertificates(
  dir: string,
  names: string[] = ['127.0.0.1', 'localhost'],
  prefix = 'admission',
): TestCertificates {
  const file = (n: string) => join(dir, `${prefix}-${n}`);
  openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    `/CN=${prefix}-ca`,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
  ]);
  const san = names.map((n) => (/^[0-9.:]+$/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
  writeFileSync(file('ext.cnf'), `subjectAltName=${san}\n`);
  openssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    `/CN=${names[0] ?? 'admission'}`,
    '-keyout',
    file('tls.key'),
    '-out',
    file('tls.csr'),
  ]);
  openssl([
    'x509',
    '-req',
    '-in',
    file('tls.csr'),
    '-CA',
    file('ca.crt'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    file('ext.cnf'),
    '-out',
    file('tls.crt'),
  ]);
  return {
    caFile: file('ca.crt'),
    certFile: file('tls.crt'),
    keyFile: file('tls.key'),
    ca: readFileSync(file('ca.crt'), 'utf8'),
  };
}

export interface TestWebhook {
  admission: RunningAdmission;
  url: string;
  logs: string[];
}

/** Starts the webhook on 127.0.0.1 (a free port unless given) with this certificate pair. */
export async function startTestWebhook(options: {
  serverUrl: string;
  apiKey?: string;
  certFile: string;
  keyFile: string;
  failurePolicy?: 'Fail' | 'Ignore';
  timeoutMs?: number;
  reloadIntervalMs?: number;
  port?: number;
}): Promise<TestWebhook> {
  const logs: string[] = [];
  const line = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    logs.push(`${level} ${msg} ${JSON.stringify(fields ?? {})}`);
  const admission = await startAdmission({
    host: '127.0.0.1',
    port: options.port ?? 0,
    certFile: options.certFile,
    keyFile: options.keyFile,
    server: new TouchstoneClient(options.serverUrl, options.apiKey, options.timeoutMs ?? 5000),
    failurePolicy: options.failurePolicy ?? 'Fail',
    reloadIntervalMs: options.reloadIntervalMs ?? 10_000,
    log: { info: line('info'), warn: line('warn') },
  });
  return { admission, url: `https://127.0.0.1:${admission.port}/validate`, logs };
}

export interface HttpsAnswer {
  status: number;
  text: string;
}

export interface PostOptions {
  /** The name the certificate must carry, when it is not the URL's host (a Service's). */
  servername?: string;
  /** Send the body in chunks without a content-length, as a stream. */
  chunked?: boolean;
}

/**
 * POSTs `body` (an object as JSON, or raw bytes) over HTTPS, trusting only `ca` and checking the
 * certificate against `servername` when given (else the URL's host).
 */
export function postReview(
  url: string,
  ca: string,
  body: unknown,
  options: PostOptions = {},
): Promise<HttpsAnswer> {
  const payload = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        ca,
        // A fresh connection each time: a kept-alive one would outlive a certificate rotation.
        agent: false,
        ...(options.servername === undefined ? {} : { servername: options.servername }),
        headers: {
          'content-type': 'application/json',
          ...(options.chunked === true ? {} : { 'content-length': payload.length }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    const step = options.chunked === true ? 64 * 1024 : payload.length;
    for (let at = 0; at < payload.length; at += step) req.write(payload.subarray(at, at + step));
    req.end();
  });
}

/** An admission.k8s.io/v1 AdmissionReview of `object` as the API server sends it. */
export function admissionReview(
  uid: string,
  operation: 'CREATE' | 'UPDATE' | 'DELETE',
  object: Record<string, unknown> | null,
  oldObject: Record<string, unknown> | null = null,
) {
  const source = (object ?? oldObject ?? {}) as {
    kind?: KindName;
    metadata?: { name?: string; namespace?: string };
  };
  const plural = source.kind === undefined ? '' : KINDS[source.kind].plural;
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: 'touchstone.dev', version: 'v1alpha1', kind: source.kind ?? '' },
      resource: { group: 'touchstone.dev', version: 'v1alpha1', resource: plural },
      name: source.metadata?.name,
      namespace: source.metadata?.namespace,
      operation,
      userInfo: { username: 'alice', groups: ['system:authenticated'] },
      object,
      oldObject,
      dryRun: false,
    },
  };
}
