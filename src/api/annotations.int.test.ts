import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';
import { TestReceiver } from '../webhooks/receiver.testkit.js';

/**
 * Human annotation over REST: `POST /v1alpha1/traces/{id}/annotations` stores a person's score
 * in the `@human` group (one per person and name), shown by the trace's scores and the bulk
 * scores list, announced as `trace.scored` to webhooks that list it; validation, visibility,
 * redaction of the comment and Idempotency-Key. On SQLite, and PostgreSQL when configured.
 */

const T0 = Date.parse('2026-11-22T10:00:00Z');

describe.each(storeVariants())('annotations on $name', (variant) => {
  const clock = new FakeClock(T0);
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;
  let receiver: TestReceiver;
  const keys: Record<string, { secret: string; id: string }> = {};
  let checkout: string;
  let search: string;

  const call = (
    method: 'GET' | 'POST',
    url: string,
    key: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) =>
    app.server.inject({
      method,
      url,
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      headers: {
        authorization: `Bearer ${keys[key]?.secret}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
    });
  const annotate = (traceId: string, body: unknown, key = 'alice', headers = {}) =>
    call('POST', `/v1alpha1/traces/${traceId}/annotations`, key, body, headers);

  async function sendTrace(service: string): Promise<string> {
    let traceId = '';
    const spans = recordSpans({ 'service.name': service }, (tr) => {
      traceId = agentTrace(tr, { fail: false });
    });
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${keys.ingest?.secret}`,
      },
    });
    expect(res.statusCode).toBe(200);
    clock.advance(1500);
    await app.completer.tick();
    return traceId;
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-annotations-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        auth: {},
        traces: { completion_grace: '1s', redaction: { pii: ['email'] } },
        webhooks: { allow_hosts: ['127.0.0.1'] },
        ...store.overrides,
      },
    });
    app = await createApp(config, {
      env: {},
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    const key = async (
      name: string,
      project: string,
      role: 'owner' | 'editor' | 'viewer' | 'ingest',
      services?: string[],
    ) => {
      const created = await app.keys.create(OPEN_PRINCIPAL, {
        project,
        roles: [role],
        name,
        ...(services === undefined ? {} : { scope: { services } }),
      });
      keys[name] = { secret: created.secret, id: created.key.id };
    };
    await key('owner', 'shop', 'owner');
    await key('alice', 'shop', 'editor');
    await key('bob', 'shop', 'editor');
    await key('viewer', 'shop', 'viewer');
    await key('ingest', 'shop', 'ingest');
    await key('searcher', 'shop', 'editor', ['search']);
    await key('outsider', 'other', 'owner');
    receiver = await TestReceiver.start(() => clock.now());
    const hook = await call('POST', '/v1alpha1/webhooks', 'owner', {
      name: 'scores',
      url: receiver.url,
      events: ['trace.scored'],
    });
    expect(hook.statusCode).toBe(200);
    receiver.secret = hook.json().secret;
    checkout = await sendTrace('checkout');
    search = await sendTrace('search');
  });
  afterAll(async () => {
    await app.close();
    await receiver.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stores a score as the annotator’s result, shown by the trace’s scores and the scores list', async () => {
    const res = await annotate(checkout, { name: 'correct', value: 0.75, comment: 'close' });
    expect(res.statusCode).toBe(200);
    const annotator = { kind: 'human', principal: keys.alice?.id };
    expect(res.json()).toStrictEqual({
      project: 'shop',
      traceId: checkout,
      policy: '@human',
      result: {
        evaluator: 'correct',
        outcome: 'OUTCOME_SCORED',
        scores: [{ name: 'correct', value: 0.75, explanation: 'close' }],
        durationMs: 0,
        annotator,
      },
    });
    const scores = await call('GET', `/v1alpha1/traces/${checkout}/scores`, 'viewer');
    expect(scores.statusCode).toBe(200);
    expect(scores.json().results['@human']).toEqual([res.json().result]);

    const listed = await call('GET', '/v1alpha1/scores?policy=@human', 'viewer');
    expect(
      listed.json().entries.map((e: { trace: { traceId: string } }) => e.trace.traceId),
    ).toEqual([checkout]);
    expect(listed.json().entries[0].results['@human'][0].annotator).toEqual(annotator);
  });

  it('annotating the same name again replaces one’s own score; another person’s stays beside it', async () => {
    expect((await annotate(checkout, { name: 'helpful', passed: false })).statusCode).toBe(200);
    expect((await annotate(checkout, { name: 'helpful', passed: true })).statusCode).toBe(200);
    const bob = await annotate(checkout, { name: 'helpful', label: 'partly' }, 'bob');
    expect(bob.statusCode).toBe(200);
    const human = (await call('GET', `/v1alpha1/traces/${checkout}/scores`, 'viewer')).json()
      .results['@human'] as {
      evaluator: string;
      scores: unknown[];
      annotator: { principal: string };
    }[];
    const helpful = human.filter((r) => r.evaluator === 'helpful');
    expect(helpful.map((r) => [r.annotator.principal, r.scores])).toEqual(
      [
        [keys.alice?.id, [{ name: 'helpful', passed: true }]],
        [keys.bob?.id, [{ name: 'helpful', label: 'partly' }]],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
  });

  it('redacts the comment and label before storing them, as trace text is', async () => {
    const res = await annotate(search, {
      name: 'privacy',
      label: 'mail jane@example.com',
      comment: 'the answer leaked jane@example.com',
    });
    expect(res.statusCode).toBe(200);
    const stored = await call('GET', `/v1alpha1/traces/${search}/scores`, 'viewer');
    expect(stored.body).not.toContain('jane@example.com');
    expect(stored.json().results['@human'][0].scores[0]).toMatchObject({
      label: 'mail [REDACTED]',
      explanation: 'the answer leaked [REDACTED]',
    });
  });

  it('refuses a malformed annotation naming the field, never echoing it', async () => {
    const secretish = `sk-${'x'.repeat(300)}`;
    const cases: [unknown, string][] = [
      [{ value: 1 }, 'name'],
      [{ name: 'bad name', value: 1 }, 'name'],
      [{ name: '', value: 1 }, 'name'],
      [{ name: 'x'.repeat(65), value: 1 }, 'name'],
      [{ name: 'n' }, 'value'],
      [{ name: 'n', value: 1, passed: true }, 'value'],
      [{ name: 'n', value: 1.5 }, 'value'],
      [{ name: 'n', value: -0.1 }, 'value'],
      [{ name: 'n', value: '1' }, 'value'],
      [{ name: 'n', passed: 'yes' }, 'passed'],
      [{ name: 'n', label: secretish }, 'label'],
      [{ name: 'n', label: '' }, 'label'],
      [{ name: 'n', value: 1, comment: `${secretish}${'y'.repeat(4096)}` }, 'comment'],
      [{ name: 'n', value: 1, comment: 'bell\u0007' }, 'comment'],
      [{ name: 'n', value: 1, score: 2 }, 'score'],
      [[1], '(root)'],
    ];
    for (const [body, field] of cases) {
      const res = await annotate(checkout, body);
      const what = `${JSON.stringify(body).slice(0, 60)} → ${res.body.slice(0, 300)}`;
      expect(res.statusCode, what).toBe(400);
      const { error } = res.json();
      expect(error.code, what).toBe('ANNOTATION_INVALID');
      expect(
        error.details.map((d: { path: string }) => d.path),
        what,
      ).toContain(field);
      expect(res.body).not.toContain('xxxxxxxxxx');
    }
  });

  it('needs traces.annotate, and a trace the caller can read', async () => {
    const body = { name: 'ok', passed: true };
    const viewer = await annotate(checkout, body, 'viewer');
    expect(viewer.statusCode).toBe(403);
    expect(viewer.json().error.code).toBe('PERMISSION_DENIED');
    expect((await annotate(checkout, body, 'ingest')).statusCode).toBe(403);
    // The scoped key sees only the search service: the checkout trace does not exist for it.
    const hidden = await annotate(checkout, body, 'searcher');
    expect(hidden.statusCode).toBe(404);
    expect(hidden.json().error.code).toBe('TRACE_NOT_FOUND');
    expect((await annotate(search, body, 'searcher')).statusCode).toBe(200);
    expect((await annotate('f'.repeat(32), body)).statusCode).toBe(404);
    // Another project's key finds nothing in its own project and may not name this one.
    expect((await annotate(checkout, body, 'outsider')).statusCode).toBe(404);
    const named = await call(
      'POST',
      `/v1alpha1/traces/${checkout}/annotations?project=shop`,
      'outsider',
      body,
    );
    expect(named.statusCode).toBe(403);
  });

  it('honours Idempotency-Key: a retry replays, another payload under the key conflicts', async () => {
    const key = { 'idempotency-key': 'annotate-1' };
    const first = await annotate(checkout, { name: 'idem', value: 0.5 }, 'alice', key);
    expect(first.statusCode).toBe(200);
    const again = await annotate(checkout, { name: 'idem', value: 0.5 }, 'alice', key);
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    const changed = await annotate(checkout, { name: 'idem', value: 0.25 }, 'alice', key);
    expect(changed.statusCode).toBe(409);
    expect(changed.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const human = (await call('GET', `/v1alpha1/traces/${checkout}/scores`, 'viewer')).json()
      .results['@human'] as { evaluator: string; scores: { value?: number }[] }[];
    expect(human.find((r) => r.evaluator === 'idem')?.scores[0]?.value).toBe(0.5);
  });

  it('fires trace.scored, policy @human, with the annotation to webhooks that list it', async () => {
    receiver.received.length = 0;
    const res = await annotate(checkout, { name: 'hooked', label: 'great', comment: 'nice' });
    expect(res.statusCode).toBe(200);
    await app.webhooks.dispatcher.tick();
    const delivered = receiver.received
      .filter((r) => r.event === 'trace.scored')
      .map((r) => JSON.parse(r.body));
    const mine = delivered.find((d) => d.results[0]?.evaluator === 'hooked');
    expect(receiver.received.every((r) => r.verified)).toBe(true);
    expect(mine).toMatchObject({
      type: 'trace.scored',
      project: 'shop',
      policy: '@human',
      trace: { traceId: checkout, service: 'checkout' },
      results: [
        {
          evaluator: 'hooked',
          outcome: 'OUTCOME_SCORED',
          scores: [{ name: 'hooked', label: 'great', explanation: 'nice' }],
          annotator: { kind: 'human', principal: keys.alice?.id },
        },
      ],
    });
  });
});
