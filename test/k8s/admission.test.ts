import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_REVIEW_BYTES } from '../../src/operator/admission.js';
import { eventually, freePort, type RunningServer } from '../support/process.js';
import {
  admissionReview,
  makeCertificates,
  postReview,
  startTestWebhook,
  type TestCertificates,
  type TestWebhook,
} from './admission-harness.js';
import { type OperatorServer, startOperatorServer } from './operator-server.js';

/**
 * The validating admission webhook over HTTPS (a CA and serving certificate made for the test),
 * backed by a real `touchstone serve` process with API keys on: AdmissionReview JSON in,
 * AdmissionReview out, refusing what the API refuses with the API's message.
 */

type Json = Record<string, unknown>;
const NS = 'support';

/** The API's declarative document of a custom resource: no namespace. */
function apiDoc(cr: Json): Json {
  const { namespace: _, ...metadata } = cr.metadata as Json;
  return { ...cr, metadata };
}

function resource(kind: string, name: string, spec: Json, extra: Json = {}): Json {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind,
    metadata: { name, namespace: NS, labels: { 'touchstone.dev/project': NS }, ...extra },
    spec,
  };
}

const SOURCE = {
  connector: 'langfuse',
  endpoint: 'http://127.0.0.1:9',
  locations: ['production'],
  credentials: { env: 'LANGFUSE_KEY' },
};
const POLICY = { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] };

interface Answer {
  status: number;
  text: string;
  review?: { apiVersion: string; kind: string; response: Json };
  /** The AdmissionResponse; empty when the answer is not a review. */
  response: Json & { status?: { code: number; message: string; reason: string } };
}

describe('the admission webhook against a real server', () => {
  let dir = '';
  let certs: TestCertificates;
  let touchstone: OperatorServer | undefined;
  let server: RunningServer | undefined;
  let key = '';
  let webhook: TestWebhook;
  const stops: (() => Promise<void>)[] = [];

  const post = async (hook: TestWebhook, body: unknown, ca = certs.ca): Promise<Answer> => {
    const res = await postReview(hook.url, ca, body);
    let review: Answer['review'];
    try {
      review = JSON.parse(res.text) as Answer['review'];
    } catch {
      review = undefined;
    }
    return {
      status: res.status,
      text: res.text,
      response: review?.response ?? {},
      ...(review === undefined ? {} : { review }),
    };
  };
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server?.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const start = async (options: Partial<Parameters<typeof startTestWebhook>[0]> = {}) => {
    const hook = await startTestWebhook({
      serverUrl: server?.base ?? '',
      apiKey: key,
      certFile: certs.certFile,
      keyFile: certs.keyFile,
      ...options,
    });
    stops.push(() => hook.admission.stop());
    return hook;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-admission-'));
    certs = makeCertificates(dir);
    touchstone = await startOperatorServer(dir, NS);
    ({ server, key } = touchstone);
    webhook = await start();
  }, 120_000);

  afterAll(async () => {
    for (const stop of stops) await stop();
    await touchstone?.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('allows a valid TraceSource, echoing the uid, and stores nothing (validate_only)', async () => {
    const uid = '0b1c6a4e-1d2f-4c55-9a10-6f1f0e7c2a01';
    const res = await post(
      webhook,
      admissionReview(uid, 'CREATE', resource('TraceSource', 'prod', SOURCE)),
    );
    expect(res.status).toBe(200);
    expect(res.review).toEqual({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid, allowed: true },
    });
    expect((await api('GET', `/v1alpha1/sources/prod?project=${NS}`)).status).toBe(404);
  });

  it('refuses a policy with an invalid CEL selector, with the API message', async () => {
    const policy = resource('OnlineEvalPolicy', 'bad-selector', {
      ...POLICY,
      selector: 'trace.attributes[',
    });
    const direct = await api('POST', '/v1alpha1/policies?validate_only=true', apiDoc(policy));
    expect(direct.status).toBeGreaterThanOrEqual(400);
    const error = direct.body.error as { code: string; message: string };
    const res = await post(webhook, admissionReview('uid-cel', 'CREATE', policy));
    expect(res.status).toBe(200);
    const response = res.response as {
      uid: string;
      allowed: boolean;
      status: { code: number; message: string; reason: string };
    };
    expect(response.uid).toBe('uid-cel');
    expect(response.allowed).toBe(false);
    expect(response.status.code).toBe(direct.status);
    expect(response.status.reason).toBe('Invalid');
    expect(response.status.message).toContain(`${error.code}: ${error.message}`);
    expect(response.status.message).toMatch(/selector/);
  });

  it('admits a source naming a policy that does not exist yet, with a warning', async () => {
    const source = resource('TraceSource', 'waits', { ...SOURCE, policies: ['quality-later'] });
    const res = await post(webhook, admissionReview('uid-warn', 'CREATE', source));
    const response = res.response as { allowed: boolean; warnings: string[] };
    expect(response.allowed).toBe(true);
    expect(response.warnings).toHaveLength(1);
    expect(response.warnings[0]).toContain('syncs this TraceSource once the policy exists');
    // Once the policy exists there is nothing to warn about.
    const created = await api(
      'POST',
      '/v1alpha1/policies',
      apiDoc(resource('OnlineEvalPolicy', 'quality-later', POLICY)),
    );
    expect(created.status, JSON.stringify(created.body)).toBeLessThan(300);
    const again = await post(webhook, admissionReview('uid-warn-2', 'CREATE', source));
    expect(again.response).toEqual({ uid: 'uid-warn-2', allowed: true });
  });

  it('checks updates that change the spec, and refuses what the API refuses there too', async () => {
    const good = resource('OnlineEvalPolicy', 'p', POLICY);
    const bad = resource('OnlineEvalPolicy', 'p', { ...POLICY, sampling: { rate: 7 } });
    const res = await post(webhook, admissionReview('uid-upd', 'UPDATE', bad, good));
    expect(res.response.allowed).toBe(false);
    expect(res.response.status?.code).toBe(400);
  });

  it('refuses a change of an EvalRun whose run exists: runs never change', async () => {
    const run = resource('EvalRun', 'release-1', {
      dataset: { records: [{ id: 'a', input: 'q', output: 'a', reference: 'a' }] },
      evaluators: [{ ref: 'exact-match' }],
    });
    const created = { ...run, status: { runId: 'run_0123', phase: 'Succeeded' } };
    const changed = { ...created, spec: { ...(run.spec as Json), gates: ['exact-match >= 0.9'] } };
    const res = await post(webhook, admissionReview('uid-run', 'UPDATE', changed, created));
    expect(res.response).toMatchObject({ allowed: false, status: { code: 422 } });
    expect(res.response.status?.message).toContain('run run_0123 was created from an earlier spec');
    // Before its run exists, an EvalRun may still change (the server checks the new spec).
    const early = await post(
      webhook,
      admissionReview('uid-run-2', 'UPDATE', { ...changed, status: {} }, run),
    );
    expect(early.response).toEqual({ uid: 'uid-run-2', allowed: true });
  });

  it('a Webhook is checked without its Secret (secretRef is the operator’s business)', async () => {
    const hook = resource('Webhook', 'ci', {
      url: 'http://127.0.0.1:9/hook',
      events: ['run.finished'],
      secretRef: { name: 'absent', key: 'secret' },
    });
    const ok = await post(webhook, admissionReview('uid-wh', 'CREATE', hook));
    expect(ok.response).toEqual({ uid: 'uid-wh', allowed: true });
    const refused = await post(
      webhook,
      admissionReview('uid-wh-bad', 'CREATE', {
        ...hook,
        spec: { ...(hook.spec as Json), url: 'https://user:hunter2@hooks.example.com/h' },
      }),
    );
    expect(refused.response).toMatchObject({ allowed: false, status: { code: 400 } });
    const message = refused.response.status?.message;
    expect(message).toContain('the URL must not carry user:password@');
    expect(message).not.toContain('hunter2');
  });

  describe('with the server unreachable', () => {
    let blackHole: Server;
    let blackHoleUrl = '';
    const held: Socket[] = [];

    beforeAll(async () => {
      // Accepts and never answers: the webhook's own timeout must end the call.
      blackHole = createServer((socket) => held.push(socket));
      await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
      blackHoleUrl = `http://127.0.0.1:${(blackHole.address() as { port: number }).port}`;
    });
    afterAll(async () => {
      for (const s of held) s.destroy();
      await new Promise<void>((resolve) => blackHole.close(() => resolve()));
    });

    it('failurePolicy Fail: refused within the webhook timeout, saying why', async () => {
      const hook = await start({ serverUrl: blackHoleUrl, timeoutMs: 1000 });
      const began = Date.now();
      const res = await post(
        hook,
        admissionReview('uid-down', 'CREATE', resource('TraceSource', 'prod', SOURCE)),
      );
      const elapsed = Date.now() - began;
      // Under the API server's default 10 s, with margin for a loaded machine.
      expect(elapsed).toBeLessThan(6000);
      expect(res.response).toMatchObject({
        uid: 'uid-down',
        allowed: false,
        status: { code: 503, reason: 'ServiceUnavailable' },
      });
      const message = res.response.status?.message;
      expect(message).toContain('TraceSource not checked (failurePolicy Fail)');
      expect(message).toContain('cannot reach the Touchstone server');
    });

    it('failurePolicy Ignore: admitted with a warning', async () => {
      const refused = await freePort();
      const hook = await start({
        serverUrl: `http://127.0.0.1:${refused}`,
        failurePolicy: 'Ignore',
      });
      const res = await post(
        hook,
        admissionReview('uid-ign', 'CREATE', resource('TraceSource', 'prod', SOURCE)),
      );
      const response = res.response as { allowed: boolean; warnings: string[] };
      expect(response.allowed).toBe(true);
      expect(response.warnings[0]).toMatch(/^not checked by Touchstone: cannot reach/);
    });

    it('never asks the server about deletes, finalizer updates or objects being deleted', async () => {
      const hook = await start({ serverUrl: blackHoleUrl, timeoutMs: 1000 });
      const source = resource('TraceSource', 'prod', SOURCE);
      const finalized = {
        ...source,
        metadata: { ...(source.metadata as Json), finalizers: ['touchstone.dev/operator'] },
      };
      const deleting = {
        ...finalized,
        metadata: { ...(finalized.metadata as Json), deletionTimestamp: '2026-11-27T00:00:00Z' },
      };
      const cases = [
        admissionReview('d1', 'DELETE', null, source),
        admissionReview('d2', 'UPDATE', finalized, source),
        admissionReview(
          'd3',
          'UPDATE',
          { ...deleting, metadata: { ...(deleting.metadata as Json), finalizers: [] } },
          deleting,
        ),
      ];
      const began = Date.now();
      for (const review of cases) {
        const res = await post(hook, review);
        expect(res.response).toEqual({ uid: review.request.uid, allowed: true });
      }
      expect(Date.now() - began).toBeLessThan(1000);
    });
  });

  it('answers a malformed review 400 without echoing it', async () => {
    const marker = 'sk-secret-marker-9f8e7d';
    const notReview = await post(webhook, { apiVersion: 'v1', kind: 'Pod', marker });
    expect(notReview.status).toBe(400);
    expect(notReview.text).toContain('not an admission.k8s.io/v1 AdmissionReview');
    expect(notReview.text).not.toContain(marker);
    const notJson = await post(webhook, Buffer.from(`{"uid": "${marker}"`));
    expect(notJson.status).toBe(400);
    expect(notJson.text).not.toContain(marker);
    const noUid = admissionReview('', 'CREATE', resource('TraceSource', 'x', { marker }));
    const missing = await post(webhook, noUid);
    expect(missing.status).toBe(400);
    expect(missing.text).toContain('request.uid');
    expect(missing.text).not.toContain(marker);
  });

  it(`refuses a body over ${MAX_REVIEW_BYTES} bytes with 413, announced or streamed`, async () => {
    const big = Buffer.alloc(MAX_REVIEW_BYTES + 1, 'a');
    for (const chunked of [false, true]) {
      const res = await postReview(webhook.url, certs.ca, big, { chunked });
      expect(res.status, `chunked: ${chunked}`).toBe(413);
      expect(res.text).toContain('a review is at most');
    }
    // And it goes on answering.
    const review = admissionReview(
      'uid-after',
      'DELETE',
      null,
      resource('TraceSource', 'x', SOURCE),
    );
    expect((await post(webhook, review)).status).toBe(200);
  });

  it('answers 404 outside POST /validate', async () => {
    const res = await postReview(webhook.url.replace('/validate', '/mutate'), certs.ca, {});
    expect(res.status).toBe(404);
  });

  it('reloads its certificate when the files change', async () => {
    const first = makeCertificates(dir, ['127.0.0.1'], 'first');
    const second = makeCertificates(dir, ['127.0.0.1'], 'second');
    const cert = join(dir, 'live.crt');
    const keyFile = join(dir, 'live.key');
    copyFileSync(first.certFile, cert);
    copyFileSync(first.keyFile, keyFile);
    const hook = await start({ certFile: cert, keyFile, reloadIntervalMs: 100 });
    const review = admissionReview('uid-rot', 'DELETE', null, resource('TraceSource', 'x', SOURCE));
    expect((await post(hook, review, first.ca)).status).toBe(200);
    copyFileSync(second.keyFile, keyFile);
    copyFileSync(second.certFile, cert);
    const rotated = await eventually(async () => {
      const res = await postReview(hook.url, second.ca, review).catch(() => undefined);
      return res?.status === 200 ? res : undefined;
    }, 10_000);
    expect(rotated.status).toBe(200);
    await expect(postReview(hook.url, first.ca, review)).rejects.toThrow();
    expect(hook.logs.join('\n')).toContain('admission certificate reloaded');
  });
});
