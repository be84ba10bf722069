import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { storeVariants } from '../../test/support/stores.js';
import { type KeyService, OPEN_PRINCIPAL } from '../auth/index.js';
import { FakeClock } from '../core/index.js';
import { openStore, type Store, StoreErrors } from '../store/index.js';
import { installAuth } from './auth-hook.js';
import { sendError } from './errors.js';
import { IdempotencyService, idempotentRoutes, installIdempotency } from './idempotency/index.js';

/**
 * Idempotency-Key over HTTP: the hook on the real app's marked routes (evaluate, webhooks,
 * policies, keys, and every other route carrying the marker), on SQLite and PostgreSQL; and the
 * hook's mechanics (in flight, eviction, raw bodies, response limit) on a small app of its own.
 */

type Method = 'GET' | 'POST' | 'DELETE';

interface Send {
  method: Method;
  url: string;
  body?: unknown;
  raw?: { type: string; data: string | Buffer };
  key?: string;
  secret?: string;
}

function sender(server: () => FastifyInstance) {
  return (req: Send): Promise<LightMyRequestResponse> =>
    server().inject({
      method: req.method,
      url: req.url,
      ...(req.body === undefined ? {} : { payload: JSON.stringify(req.body) }),
      ...(req.raw === undefined ? {} : { payload: req.raw.data }),
      headers: {
        ...(req.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(req.raw === undefined ? {} : { 'content-type': req.raw.type }),
        ...(req.key === undefined ? {} : { 'idempotency-key': req.key }),
        ...(req.secret === undefined ? {} : { authorization: `Bearer ${req.secret}` }),
      },
    });
}

const REPLAYED = 'idempotent-replayed';

/** Status and body identical, and the second marked as a replay. */
function expectReplay(first: LightMyRequestResponse, again: LightMyRequestResponse): void {
  expect(again.headers[REPLAYED]).toBe('true');
  expect(first.headers[REPLAYED]).toBeUndefined();
  expect(again.statusCode).toBe(first.statusCode);
  expect(again.body).toBe(first.body);
  expect(again.headers['content-type']).toBe(first.headers['content-type']);
}

const evaluation = (output: string) => ({
  records: [{ id: 'r1', input: 'q', output, reference: 'b' }],
  evaluators: [{ ref: 'exact-match' }],
});

const policy = (name: string) => ({
  apiVersion: 'touchstone.dev/v1alpha1',
  kind: 'OnlineEvalPolicy',
  metadata: { name },
  spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
});

/** The retryable writes of the spec, by operation: method and path (parameters as `{}`). */
const REQUIRED: Record<string, [Method, string]> = {
  'runs.create': ['POST', '/v1alpha1/runs'],
  'runs.delete': ['DELETE', '/v1alpha1/runs/{}'],
  'datasets.upload': ['POST', '/v1alpha1/datasets/{}/upload'],
  evaluate: ['POST', '/v1alpha1/evaluate'],
  'webhooks.apply': ['POST', '/v1alpha1/webhooks'],
  'webhooks.delete': ['DELETE', '/v1alpha1/webhooks/{}'],
  'sources.apply': ['POST', '/v1alpha1/sources'],
  'policies.apply': ['POST', '/v1alpha1/policies'],
  // Guard policies are applied like online policies (docs/guardrails.md).
  'guardpolicies.apply': ['POST', '/v1alpha1/guardpolicies'],
  'keys.create': ['POST', '/v1alpha1/keys'],
  'traces.annotate': ['POST', '/v1alpha1/traces/{}/annotations'],
};

/** A route pattern with its parameters as `{}` (`:name`, `:name(^re$)`), verbs kept. */
function normalize(url: string): string {
  return url.replace(/:[A-Za-z0-9_]+(\([^)]*\))?/g, '{}').replaceAll('{}{}', '{}:');
}

for (const variant of storeVariants()) {
  describe(`Idempotency-Key on the API (${variant.name})`, () => {
    let t: TestApp;
    let dispose: () => Promise<void>;
    const send = sender(() => t.app.server);

    beforeAll(async () => {
      const opened = await variant.open();
      t = await testApp(opened.overrides);
      dispose = async () => {
        await t.close();
        await opened.dispose();
      };
    });
    afterAll(async () => dispose());

    it('evaluate: replays status and body for the same key; no key, no change', async () => {
      const req = { method: 'POST' as const, url: '/v1alpha1/evaluate', body: evaluation('b') };
      const first = await send({ ...req, key: 'eval-1' });
      expect(first.statusCode).toBe(200);
      expect(first.json().results[0].results[0]).toMatchObject({ outcome: 'OUTCOME_SCORED' });
      expectReplay(first, await send({ ...req, key: 'eval-1' }));

      const changed = await send({ ...req, body: evaluation('other'), key: 'eval-1' });
      expect(changed.statusCode).toBe(409);
      expect(changed.json().error).toMatchObject({
        code: 'IDEMPOTENCY_KEY_REUSED',
        kind: 'already_exists',
      });

      const plain = [await send(req), await send(req)];
      for (const res of plain) {
        expect(res.statusCode).toBe(200);
        expect(res.headers[REPLAYED]).toBeUndefined();
      }
    });

    it('a stored client error is replayed too (400 stays 400 for that key)', async () => {
      const bad = { method: 'POST' as const, url: '/v1alpha1/evaluate', body: { records: 1 } };
      const first = await send({ ...bad, key: 'eval-bad' });
      expect(first.statusCode).toBe(400);
      expectReplay(first, await send({ ...bad, key: 'eval-bad' }));
    });

    it('refuses a malformed key with 400 before anything runs', async () => {
      const before = (await send({ method: 'GET', url: '/v1alpha1/keys' })).json().keys.length;
      for (const key of ['', 'x'.repeat(256), 'ключ']) {
        const res = await t.app.server.inject({
          method: 'POST',
          url: '/v1alpha1/keys',
          payload: JSON.stringify({ roles: ['viewer'] }),
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
        });
        expect(res.statusCode).toBe(400);
        expect(res.json().error.code).toBe('IDEMPOTENCY_KEY_INVALID');
      }
      expect((await send({ method: 'GET', url: '/v1alpha1/keys' })).json().keys.length).toBe(
        before,
      );
    });

    it('policies apply: replayed; the policy is applied once', async () => {
      const req = { method: 'POST' as const, url: '/v1alpha1/policies', body: policy('idem') };
      const first = await send({ ...req, key: 'pol-1' });
      expect(first.statusCode).toBe(200);
      expectReplay(first, await send({ ...req, key: 'pol-1' }));
      const got = await send({ method: 'GET', url: '/v1alpha1/policies/idem' });
      expect(got.json().metadata).toMatchObject({ generation: 1 });
    });

    it('keys create: the key is created once and its secret is never stored or replayed', async () => {
      const req = {
        method: 'POST' as const,
        url: '/v1alpha1/keys',
        body: { name: 'ci', roles: ['viewer'], project: 'idem' },
        key: 'key-1',
      };
      const first = await send(req);
      expect(first.statusCode).toBe(200);
      const { key, secret } = first.json();
      expect(secret).toMatch(/^tsk_/);

      const again = await send(req);
      expect(again.statusCode).toBe(409);
      expect(again.headers[REPLAYED]).toBeUndefined();
      expect(again.json().error).toMatchObject({ code: 'IDEMPOTENCY_SECRET_NOT_REPLAYED' });
      expect(again.json().error.message).toContain(key.id);
      expect(again.body).not.toContain(secret);

      const keys = (await send({ method: 'GET', url: '/v1alpha1/keys?project=idem' })).json().keys;
      expect(keys.filter((k: { name: string }) => k.name === 'ci')).toHaveLength(1);
      const record = await t.app.store.idempotency.get({
        principal: 'anonymous',
        operation: 'keys.create',
        key: 'key-1',
      });
      expect(record?.outcome?.withheld).toEqual(['secret']);
      expect(Buffer.from(record?.outcome?.body ?? []).toString()).not.toContain(secret);
      expect(Buffer.from(record?.outcome?.body ?? []).toString()).toContain(key.id);
    });

    it('webhooks apply and delete: replayed; a generated secret is withheld, a delete repeats', async () => {
      const generated = await send({
        method: 'POST',
        url: '/v1alpha1/webhooks',
        body: { name: 'gen', url: 'https://hooks.example.com/t' },
        key: 'wh-gen',
      });
      expect(generated.json().secret).toMatch(/^whsec_/);
      const again = await send({
        method: 'POST',
        url: '/v1alpha1/webhooks',
        body: { name: 'gen', url: 'https://hooks.example.com/t' },
        key: 'wh-gen',
      });
      expect(again.statusCode).toBe(409);
      expect(again.json().error.code).toBe('IDEMPOTENCY_SECRET_NOT_REPLAYED');
      expect(again.body).not.toContain(generated.json().secret);

      const own = {
        method: 'POST' as const,
        url: '/v1alpha1/webhooks',
        body: {
          name: 'own',
          url: 'https://hooks.example.com/o',
          secret: 'a-secret-of-24-characters',
        },
        key: 'wh-own',
      };
      const applied = await send(own);
      expect(applied.statusCode).toBe(200);
      expectReplay(applied, await send(own));

      const del = { method: 'DELETE' as const, url: '/v1alpha1/webhooks/own', key: 'wh-del' };
      const deleted = await send(del);
      expect(deleted.statusCode).toBe(200);
      // Without the key a second delete finds nothing; with it the first answer is repeated.
      expect((await send({ method: 'DELETE', url: '/v1alpha1/webhooks/own' })).statusCode).toBe(
        404,
      );
      expectReplay(deleted, await send(del));
      const otherTarget = await send({ ...del, url: '/v1alpha1/webhooks/gen' });
      expect(otherTarget.statusCode).toBe(409);
      expect(otherTarget.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    });

    it('answers 503 "outcome uncertain" when the database failed after the write was sent', async () => {
      const policies = t.app.store.policies;
      const upsert = policies.upsert.bind(policies);
      // The write commits, then the answer is lost: what a connection cut during COMMIT does.
      policies.upsert = async (...args) => {
        await upsert(...args);
        throw StoreErrors.STORE_OUTCOME_UNKNOWN('PostgreSQL connection lost during COMMIT');
      };
      const req = {
        method: 'POST' as const,
        url: '/v1alpha1/policies',
        body: policy('unsure'),
        key: 'pol-unsure',
      };
      let res: LightMyRequestResponse;
      try {
        res = await send(req);
      } finally {
        policies.upsert = upsert;
      }
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.json().error).toMatchObject({
        code: 'IDEMPOTENCY_OUTCOME_UNCERTAIN',
        kind: 'unavailable',
      });
      expect(res.json().error.message).toMatch(/same Idempotency-Key \(never a new one\)/);
      // It did happen; the caller reconciles (finds it), and the retry with the same key runs
      // the apply again, which converges on the same policy.
      expect((await send({ method: 'GET', url: '/v1alpha1/policies/unsure' })).statusCode).toBe(
        200,
      );
      const retry = await send(req);
      expect(retry.statusCode).toBe(200);
      expect(retry.headers[REPLAYED]).toBeUndefined();
      expect(retry.json().metadata).toMatchObject({ generation: 1 });
      expectReplay(retry, await send(req));
    });

    it('releases the key after a retryable failure, so the retry runs (and creates one key)', async () => {
      const keys = t.app.store.keys;
      const create = keys.create.bind(keys);
      keys.create = async () => {
        throw StoreErrors.STORE_UNAVAILABLE('database restarting');
      };
      const req = {
        method: 'POST' as const,
        url: '/v1alpha1/keys',
        body: { name: 'retried', roles: ['viewer'], project: 'retry' },
        key: 'key-retry',
      };
      let failed: LightMyRequestResponse;
      try {
        failed = await send(req);
      } finally {
        keys.create = create;
      }
      expect(failed.statusCode).toBe(503);
      expect(failed.json().error.code).toBe('STORE_UNAVAILABLE');
      const retried = await send(req);
      expect(retried.statusCode).toBe(200);
      expect(retried.json().secret).toMatch(/^tsk_/);
      const listed = await send({ method: 'GET', url: '/v1alpha1/keys?project=retry' });
      expect(listed.json().keys).toHaveLength(1);
    });

    it('honours the key on every route marked config.idempotency', async () => {
      const routes = idempotentRoutes(t.app.server);
      expect(routes.length).toBeGreaterThanOrEqual(6);
      for (const route of routes) {
        const path = route.url.replace(/:[A-Za-z0-9_]+(\([^)]*\))?/g, 'idem-probe');
        const key = `probe-${route.operation}`;
        // A DELETE changes its payload by the query, a POST by its body; the first body type a
        // route accepts is the probe (raw-body routes refuse JSON with 415 before running).
        const probes: [Send, Send][] =
          route.method === 'DELETE'
            ? [
                [
                  { method: 'DELETE', url: path, key },
                  { method: 'DELETE', url: `${path}?project=idem-probe-other`, key },
                ],
              ]
            : [
                [
                  { method: 'POST', url: path, body: {}, key },
                  { method: 'POST', url: path, body: { changed: true }, key },
                ],
                [
                  {
                    method: 'POST',
                    url: path,
                    raw: { type: 'application/x-ndjson', data: '{}\n' },
                    key,
                  },
                  {
                    method: 'POST',
                    url: path,
                    raw: { type: 'application/x-ndjson', data: '[]\n' },
                    key,
                  },
                ],
              ];
        let chosen: [Send, Send] | undefined;
        let first: LightMyRequestResponse | undefined;
        for (const pair of probes) {
          chosen = pair;
          first = await send(pair[0]);
          if (first.statusCode !== 415) break;
        }
        if (chosen === undefined || first === undefined) throw new Error('no probe');
        const where = `${route.method} ${route.url} (${route.operation}) answered ${first.statusCode} ${first.body}`;
        expect(first.statusCode, where).toBeLessThan(500);
        const again = await send(chosen[0]);
        expect(again.headers[REPLAYED] ?? again.json().error?.code, where).toMatch(
          /^(true|IDEMPOTENCY_SECRET_NOT_REPLAYED)$/,
        );
        if (again.headers[REPLAYED] === 'true') expectReplay(first, again);
        const changed = await send(chosen[1]);
        expect(changed.statusCode, where).toBe(409);
        expect(changed.json().error.code, where).toBe('IDEMPOTENCY_KEY_REUSED');
      }
    });
  });
}

describe('the marked routes of the app', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
  });
  afterAll(async () => t.close());

  it('mark exactly the spec’s retryable writes (runs, datasets, evaluate, webhooks, sources, policies, guard policies, keys, annotations)', () => {
    const marked = new Map<string, [string, string]>();
    for (const r of idempotentRoutes(t.app.server)) {
      expect(marked.has(r.operation), `${r.operation} marked twice`).toBe(false);
      marked.set(r.operation, [r.method, normalize(r.url)]);
    }
    // The import is an RPC; a REST twin, if one is added, may carry the marker too.
    marked.delete('datasets.import');
    expect(Object.fromEntries(marked)).toEqual(REQUIRED);
  });
});

describe('Idempotency-Key principals', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({ auth: {} });
  });
  afterAll(async () => t.close());

  it('keeps each API key’s keys apart', async () => {
    const send = sender(() => t.app.server);
    const a = await t.app.keys.create(OPEN_PRINCIPAL, { roles: ['editor'], project: 'p' });
    const b = await t.app.keys.create(OPEN_PRINCIPAL, { roles: ['editor'], project: 'p' });
    const req = { method: 'POST' as const, url: '/v1alpha1/evaluate', key: 'shared' };
    const first = await send({ ...req, body: evaluation('b'), secret: a.secret });
    expect(first.statusCode).toBe(200);
    // Another caller's identical key is its own: a different payload is no conflict.
    const other = await send({ ...req, body: evaluation('x'), secret: b.secret });
    expect(other.statusCode).toBe(200);
    expect(other.headers[REPLAYED]).toBeUndefined();
    expectReplay(first, await send({ ...req, body: evaluation('b'), secret: a.secret }));
    expect(
      await t.app.store.idempotency.get({
        principal: a.key.id,
        operation: 'evaluate',
        key: 'shared',
      }),
    ).toMatchObject({ state: 'completed' });
  });
});

for (const variant of storeVariants()) {
  describe(`the Idempotency-Key hook's mechanics (${variant.name})`, () => {
    let store: Store;
    let dataDir: string;
    let dispose: () => Promise<void>;
    let server: FastifyInstance;
    let service: IdempotencyService;
    const clock = new FakeClock();
    const gates: Array<() => void> = [];
    let runs = 0;
    const send = sender(() => server);

    async function build(options: ConstructorParameters<typeof IdempotencyService>[0]['options']) {
      service = new IdempotencyService({ store, clock, options });
      const app = Fastify();
      app.setErrorHandler((err, request, reply) => sendError(request, reply, err, 1 << 20));
      installAuth(app, {} as KeyService, false);
      installIdempotency(app, service);
      app.addContentTypeParser('application/json', { parseAs: 'string' }, (_r, body, done) =>
        done(null, JSON.parse(String(body))),
      );
      app.addContentTypeParser(
        'application/octet-stream',
        { parseAs: 'buffer' },
        (_r, body, done) => done(null, body),
      );
      // Hands the handler the stream, as a route that converts uploads as they arrive would.
      app.addContentTypeParser('application/x-ndjson', (_r, payload, done) => done(null, payload));
      app.post('/slow', { config: { idempotency: 'slow' } }, async (request) => {
        runs += 1;
        await new Promise<void>((resolve) => gates.push(resolve));
        return { got: request.body, runs };
      });
      app.post('/echo', { config: { idempotency: 'echo' } }, async (request) => {
        runs += 1;
        const body = request.body;
        if (Buffer.isBuffer(body)) return { bytes: body.length, runs };
        if (body !== null && typeof body === 'object' && 'pipe' in body) {
          const chunks: Buffer[] = [];
          for await (const c of body as Readable) chunks.push(Buffer.from(c));
          return { streamed: Buffer.concat(chunks).toString(), runs };
        }
        return { got: body, runs };
      });
      app.post('/big', { config: { idempotency: 'big' } }, async () => {
        runs += 1;
        return { blob: 'x'.repeat(500) };
      });
      await app.ready();
      return app;
    }

    beforeEach(async () => {
      runs = 0;
      dataDir = mkdtempSync(join(tmpdir(), 'touchstone-idem-hook-'));
      const opened = await variant.open();
      store = await openStore(
        {
          store: (opened.overrides.store as { driver: 'postgres'; url: string }) ?? {
            driver: 'sqlite',
          },
          data_dir: dataDir,
        },
        { clock },
      );
      server = await build({ maxKeysPerScope: 2, maxResponseBytes: 200 });
      dispose = async () => {
        await server.close();
        await service.shutdown();
        await store.close();
        await opened.dispose();
        rmSync(dataDir, { recursive: true, force: true });
      };
    });
    afterEach(async () => dispose());

    it('answers a twin of a running request with 409 and Retry-After, then replays it', async () => {
      const req = { method: 'POST' as const, url: '/slow', body: { n: 1 }, key: 'k' };
      const first = send(req);
      while (gates.length === 0) await new Promise((r) => setTimeout(r, 5));
      const twin = await send(req);
      expect(twin.statusCode).toBe(409);
      expect(twin.headers['retry-after']).toBe('1');
      expect(twin.json().error).toMatchObject({
        code: 'IDEMPOTENCY_REQUEST_IN_FLIGHT',
        kind: 'aborted',
      });
      gates.shift()?.();
      const done = await first;
      expect(done.json()).toEqual({ got: { n: 1 }, runs: 1 });
      expectReplay(done, await send(req));
      expect(runs).toBe(1);
    });

    it('digests the body bytes as sent: a reordered JSON object is another payload', async () => {
      const first = await send({
        method: 'POST',
        url: '/echo',
        raw: { type: 'application/json', data: '{"a":1,"b":2}' },
        key: 'j',
      });
      expect(first.statusCode).toBe(200);
      const reordered = await send({
        method: 'POST',
        url: '/echo',
        raw: { type: 'application/json', data: '{"b":2,"a":1}' },
        key: 'j',
      });
      expect(reordered.statusCode).toBe(409);
      expectReplay(
        first,
        await send({
          method: 'POST',
          url: '/echo',
          raw: { type: 'application/json', data: '{"a":1,"b":2}' },
          key: 'j',
        }),
      );
    });

    it('digests raw and streamed bodies, and the handler still reads every byte', async () => {
      const bytes = Buffer.alloc(300_000, 7);
      const raw = {
        method: 'POST' as const,
        url: '/echo',
        raw: { type: 'application/octet-stream', data: bytes },
        key: 'raw',
      };
      const first = await send(raw);
      expect(first.json()).toEqual({ bytes: 300_000, runs: 1 });
      expectReplay(first, await send(raw));
      const flipped = Buffer.from(bytes);
      flipped[299_999] = 8;
      expect((await send({ ...raw, raw: { ...raw.raw, data: flipped } })).statusCode).toBe(409);

      const rows = '{"id":"a"}\n{"id":"b"}\n';
      const streamed = {
        method: 'POST' as const,
        url: '/echo',
        raw: { type: 'application/x-ndjson', data: rows },
        key: 'stream',
      };
      const s1 = await send(streamed);
      expect(s1.json()).toEqual({ streamed: rows, runs: 2 });
      expectReplay(s1, await send(streamed));
      expect(
        (await send({ ...streamed, raw: { ...streamed.raw, data: `${rows}{"id":"c"}\n` } }))
          .statusCode,
      ).toBe(409);
      expect(runs).toBe(2);
    });

    it('evicts the oldest key of a full scope', async () => {
      for (const k of ['k1', 'k2', 'k3']) {
        clock.advance(1);
        expect((await send({ method: 'POST', url: '/echo', body: { k }, key: k })).statusCode).toBe(
          200,
        );
      }
      // k1 was evicted: the key is new again, so another payload runs instead of conflicting.
      const reused = await send({ method: 'POST', url: '/echo', body: { k: 'other' }, key: 'k1' });
      expect(reused.statusCode).toBe(200);
      expect(reused.headers[REPLAYED]).toBeUndefined();
      expect(
        (await send({ method: 'POST', url: '/echo', body: { k: 'k3' }, key: 'k3' })).headers[
          REPLAYED
        ],
      ).toBe('true');
    });

    it('refuses a response too large to store, and replays the refusal', async () => {
      const req = { method: 'POST' as const, url: '/big', body: {}, key: 'big' };
      const first = await send(req);
      expect(first.statusCode).toBe(400);
      expect(first.json().error.code).toBe('IDEMPOTENCY_RESPONSE_TOO_LARGE');
      expectReplay(first, await send(req));
      expect(runs).toBe(1);
      // Without a key the response is not limited.
      expect((await send({ method: 'POST', url: '/big', body: {} })).statusCode).toBe(200);
    });

    it('marks writes only', async () => {
      const app = Fastify();
      installIdempotency(app, service);
      expect(() => app.get('/read', { config: { idempotency: 'read' } }, async () => ({}))).toThrow(
        /writes only/,
      );
    });
  });
}
