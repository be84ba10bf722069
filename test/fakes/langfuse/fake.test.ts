import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentRun, SAMPLE_GENERATION_ID, SAMPLE_TRACE_ID, sampleTrace } from './samples.js';
import { LangfuseFake } from './server.js';
import { SPEC } from './spec.js';

/**
 * The contract fake itself: it accepts what Langfuse's definitions (v4.16.0) say is valid — the
 * request examples of `CreateScoreRequest` in fern/apis/server/definition/scores.yml — refuses
 * (and records) what they say is not, and serves the v2 observations and v3 scores semantics the
 * connector relies on.
 */

let fake: LangfuseFake;
let auth: string;

beforeAll(async () => {
  fake = await LangfuseFake.start();
  auth = `Basic ${Buffer.from(fake.credential).toString('base64')}`;
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => {
  fake.observations.length = 0;
  fake.scores.clear();
  fake.scoreConfigs.configs.clear();
  fake.violations.length = 0;
  fake.mode = 'v4';
  fake.throttle = undefined;
  fake.scoreVisibilityLagMs = 0;
});

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = { authorization: auth },
): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${fake.url}${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return {
    status: res.status,
    json: (await res.json()) as Record<string, unknown>,
    headers: res.headers,
  };
}

describe('the spec it is built from', () => {
  it('is the v4.16.0 generated OpenAPI file, without prose', () => {
    expect(SPEC.source).toEqual({
      repository: 'https://github.com/langfuse/langfuse',
      path: 'web/public/generated/api/openapi.yml',
      tag: 'v4.16.0',
      commit: '12453aab35d43f1f5254571c95e456a03cf6a4ca',
    });
    expect(JSON.stringify(SPEC)).not.toContain('"description"');
  });
});

describe('POST /api/public/scores', () => {
  // The request examples of CreateScoreRequest in Langfuse's definitions (scores.yml, v4.16.0).
  const EXAMPLES = [
    { name: 'novelty', value: 0.9, traceId: 'cdef-1234-5678-90ab' },
    { name: 'consistency', value: 1.2, dataType: 'NUMERIC', traceId: 'cdef-1234-5678-90ab' },
    {
      name: 'accuracy',
      value: 0.9,
      dataType: 'NUMERIC',
      configId: '9203-4567-89ab-cdef',
      traceId: 'cdef-1234-5678-90ab',
      environment: 'test',
    },
    {
      name: 'toxicity',
      value: 'not toxic',
      traceId: 'cdef-1234-5678-90ab',
      environment: 'production',
    },
    {
      name: 'correctness',
      value: 'partially correct',
      dataType: 'CATEGORICAL',
      configId: '1234-5678-90ab-cdef',
      traceId: 'cdef-1234-5678-90ab',
    },
    { name: 'hallucination', value: 0, dataType: 'BOOLEAN', traceId: 'cdef-1234-5678-90ab' },
    {
      name: 'helpfulness',
      value: 1,
      dataType: 'BOOLEAN',
      configId: '1234-5678-90ab-cdef',
      traceId: 'cdef-1234-5678-90ab',
    },
    {
      name: 'feedback',
      value: 'Great explanation of the concept',
      dataType: 'TEXT',
      traceId: 'cdef-1234-5678-90ab',
    },
    {
      name: 'accuracy',
      value: 0.9,
      dataType: 'NUMERIC',
      configId: '9203-4567-89ab-cdef',
      traceId: 'cdef-1234-5678-90ab',
      source: 'ANNOTATION',
      queueId: 'aq-1234-5678-90ab-cdef',
    },
  ];

  it("accepts every example of Langfuse's definitions", async () => {
    for (const example of EXAMPLES) {
      const { status, json } = await call('POST', '/api/public/scores', example);
      expect(status, JSON.stringify(example)).toBe(200);
      expect(json.id).toEqual(expect.any(String));
    }
    expect(fake.violations).toEqual([]);
    expect(fake.scores.size).toBe(EXAMPLES.length);
  });

  it.each([
    ['an unknown field', { name: 'x', value: 1, traceId: 't', stringValue: 'x' }],
    ['a wrong type', { name: 'x', value: true, traceId: 't' }],
    ['a missing name', { value: 1, traceId: 't' }],
    ['an empty name', { name: '', value: 1, traceId: 't' }],
    ['a missing value', { name: 'x', traceId: 't' }],
    ['a BOOLEAN that is not 0 or 1', { name: 'x', value: 2, dataType: 'BOOLEAN', traceId: 't' }],
    ['a NUMERIC string', { name: 'x', value: '1', dataType: 'NUMERIC', traceId: 't' }],
    ['an observation without its trace', { name: 'x', value: 1, observationId: 'o' }],
    ['two targets', { name: 'x', value: 1, traceId: 't', sessionId: 's' }],
    ['no target', { name: 'x', value: 1 }],
    ['the EVAL source', { name: 'x', value: 1, traceId: 't', source: 'EVAL' }],
    ['an unknown data type', { name: 'x', value: 1, traceId: 't', dataType: 'FLOAT' }],
    ['an annotation without a config', { name: 'x', value: 1, traceId: 't', source: 'ANNOTATION' }],
  ])('refuses %s with 400 and records it', async (_what, body) => {
    const { status, json } = await call('POST', '/api/public/scores', body);
    expect(status).toBe(400);
    expect(json.message).toBe('Invalid request data');
    expect(fake.violations).toHaveLength(1);
    expect(fake.scores.size).toBe(0);
  });

  it('upserts by id; a score shows in reads after the visibility lag', async () => {
    fake.scoreVisibilityLagMs = 60_000;
    const body = { id: 'score-1', name: 'x', value: 1, dataType: 'BOOLEAN', traceId: 't' };
    expect((await call('POST', '/api/public/scores', body)).json).toEqual({ id: 'score-1' });
    expect((await call('POST', '/api/public/scores', { ...body, value: 0 })).json).toEqual({
      id: 'score-1',
    });
    expect(fake.scores.size).toBe(1);
    expect(fake.scores.get('score-1')).toMatchObject({ value: 0, writes: 2 });
    expect((await call('GET', '/api/public/v3/scores?id=score-1')).json.data).toEqual([]);
    const now = Date.now();
    fake.now = () => now + 61_000;
    const read = await call('GET', '/api/public/v3/scores?id=score-1&fields=details,subject');
    fake.now = () => Date.now();
    expect(read.json).toMatchObject({
      data: [
        {
          id: 'score-1',
          dataType: 'BOOLEAN',
          value: false,
          source: 'API',
          environment: 'default',
          subject: { kind: 'trace', id: 't' },
        },
      ],
      meta: { limit: 50 },
    });
    expect(fake.violations).toEqual([]);
  });

  it('normalizes environments as Langfuse does', async () => {
    await call('POST', '/api/public/scores', {
      id: 'e',
      name: 'x',
      value: 1,
      traceId: 't',
      environment: 'Langfuse-Prod',
    });
    expect(fake.scores.get('e')?.environment).toBe('prod');
  });
});

describe('GET /api/public/v2/observations', () => {
  beforeEach(() => {
    fake.add(...sampleTrace(Date.parse('2025-06-15T14:07:40.000Z')));
  });

  it('serves core and basic fields by default, with the enrichment fields null', async () => {
    const { json } = await call('GET', `/api/public/v2/observations?traceId=${SAMPLE_TRACE_ID}`);
    const generation = (json.data as Record<string, unknown>[]).find(
      (o) => o.id === SAMPLE_GENERATION_ID,
    );
    expect(Object.keys(generation ?? {}).sort()).toEqual(
      [
        'id',
        'traceId',
        'startTime',
        'endTime',
        'projectId',
        'parentObservationId',
        'type',
        'name',
        'level',
        'statusMessage',
        'version',
        'environment',
        'bookmarked',
        'public',
        'userId',
        'sessionId',
        'isRootObservation',
        'modelId',
        'inputPrice',
        'outputPrice',
        'totalPrice',
      ].sort(),
    );
    expect(generation).toMatchObject({
      modelId: null,
      type: 'GENERATION',
      isRootObservation: false,
    });
    expect(json.meta).toEqual({});
  });

  it('serves IO as raw strings and the reference sample as recorded', async () => {
    const { json } = await call(
      'GET',
      `/api/public/v2/observations?traceId=${SAMPLE_TRACE_ID}&fields=core,basic,io,metadata,model,usage,trace_context`,
    );
    const generation = (json.data as Record<string, unknown>[]).find(
      (o) => o.id === SAMPLE_GENERATION_ID,
    );
    expect(generation).toMatchObject({
      traceId: SAMPLE_TRACE_ID,
      startTime: '2025-06-15T14:07:41.500Z',
      endTime: '2025-06-15T14:07:42.700Z',
      parentObservationId: 'a1b2c3d4e5f60718',
      type: 'GENERATION',
      name: 'ChatCompletion',
      level: 'DEFAULT',
      environment: 'default',
      input: '{"messages":[{"role":"user","content":"What is MLflow?"}]}',
      metadata: { tenant: 'acme' },
      providedModelName: 'gpt-4o-mini',
      modelParameters: { temperature: 0 },
      usageDetails: { input: 12, output: 40, total: 52 },
      costDetails: { input: 0.0000018, output: 0.000024, total: 0.0000258 },
      totalCost: 0.0000258,
      traceName: 'answer',
      tags: ['suite:fixtures'],
    });
  });

  it('pages newest first with a keyset cursor, none on the last page', async () => {
    for (let i = 1; i <= 5; i++) fake.add(...agentRun(i, Date.parse('2025-06-16T00:00:00Z') + i));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const { json } = await call(
        'GET',
        `/api/public/v2/observations?isRootObservation=true&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      seen.push(...(json.data as { traceId: string }[]).map((o) => o.traceId.slice(0, 8)));
      cursor = (json.meta as { cursor?: string }).cursor;
      if (cursor === undefined) break;
      expect(JSON.parse(Buffer.from(cursor, 'base64').toString('utf8'))).toEqual({
        lastStartTimeTo: expect.any(String),
        lastTraceId: expect.any(String),
        lastId: expect.any(String),
      });
    }
    expect(seen).toEqual(['00000005', '00000004', '00000003', '00000002', '00000001', '6a1f0c3e']);
  });

  it('cuts metadata values to 200 characters unless expanded', async () => {
    fake.add({
      ...agentRun(9, Date.parse('2025-06-17T00:00:00Z'))[0]!,
      metadata: { long: 'é'.repeat(300) },
    });
    const path =
      '/api/public/v2/observations?traceId=00000009abababababababababababab&fields=metadata';
    const cut = (await call('GET', path)).json.data as { metadata: { long: string } }[];
    expect([...(cut[0]?.metadata.long ?? '')]).toHaveLength(200);
    const full = (await call('GET', `${path}&expandMetadata=long`)).json.data as {
      metadata: { long: string };
    }[];
    expect(full[0]?.metadata.long).toBe('é'.repeat(300));
  });

  it.each([
    ['an unknown parameter', 'sort=asc'],
    ['a limit above 1000', 'limit=1001'],
    ['a non-integer limit', 'limit=ten'],
    ['a repeated limit', 'limit=1&limit=2'],
    ['a non-boolean root flag', 'isRootObservation=yes'],
    ['a start time that is not ISO 8601', 'fromStartTime=yesterday'],
    ['an unknown level', 'level=FATAL'],
    ['parseIoAsJson=true', 'parseIoAsJson=true'],
  ])('refuses %s with 400 and records it', async (_what, query) => {
    const { status } = await call('GET', `/api/public/v2/observations?${query}`);
    expect(status).toBe(400);
    expect(fake.violations).toHaveLength(1);
  });

  it('on a v3 server with the preview opt-in, ignores isRootObservation and does not serve it', async () => {
    fake.mode = 'v3-preview';
    const { json } = await call('GET', '/api/public/v2/observations?isRootObservation=true');
    const rows = json.data as Record<string, unknown>[];
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => !('isRootObservation' in r))).toBe(true);
    expect(fake.violations).toEqual([]);
  });

  it('answers 404 on a v3 server without the v4 preview opt-in (after auth)', async () => {
    fake.mode = 'v3-without-v2';
    expect((await call('GET', '/api/public/v2/observations')).status).toBe(404);
    expect((await call('GET', '/api/public/v2/observations', undefined, {})).status).toBe(401);
    const health = await call('GET', '/api/public/health', undefined, {});
    expect(health).toMatchObject({ status: 200, json: { status: 'OK', version: '3.179.0' } });
  });
});

describe('auth and rate limits', () => {
  it('needs Basic auth with the project keys; health does not', async () => {
    expect((await call('GET', '/api/public/v3/scores', undefined, {})).status).toBe(401);
    const wrong = `Basic ${Buffer.from(`${fake.publicKey}:nope`).toString('base64')}`;
    const refused = await call('GET', '/api/public/v3/scores', undefined, { authorization: wrong });
    expect(refused.status).toBe(401);
    expect(JSON.stringify(refused.json)).not.toContain(fake.secretKey);
    expect((await call('GET', '/api/public/health', undefined, {})).json).toEqual({
      status: 'OK',
      version: '4.16.0',
    });
  });

  it('answers 429 with Retry-After while throttled', async () => {
    fake.throttle = { after: 1, retryAfterSeconds: 9 };
    expect((await call('GET', '/api/public/v3/scores')).status).toBe(200);
    const limited = await call('GET', '/api/public/v3/scores');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('9');
    expect(limited.json).toMatchObject({ code: 'rate_limited', details: { retryAfterSeconds: 9 } });
  });

  it('v3 scores refuses a limit above 100 and an observation without its trace', async () => {
    expect((await call('GET', '/api/public/v3/scores?limit=101')).status).toBe(400);
    expect((await call('GET', '/api/public/v3/scores?observationId=o')).status).toBe(400);
    expect((await call('GET', '/api/public/v3/scores?page=2')).status).toBe(400);
    expect(fake.violations).toHaveLength(3);
  });
});

describe('score configs', () => {
  it('creates, lists newest first in pages, and merges an update; BOOLEAN categories are the server’s', async () => {
    const made = await call('POST', '/api/public/score-configs', {
      name: 'tone',
      dataType: 'CATEGORICAL',
      categories: [{ label: 'warm', value: 0 }],
    });
    expect(made.status).toBe(200);
    const bool = await call('POST', '/api/public/score-configs', {
      name: 'ok',
      dataType: 'BOOLEAN',
    });
    expect(bool.json.categories).toEqual([
      { label: 'True', value: 1 },
      { label: 'False', value: 0 },
    ]);
    const page = await call('GET', '/api/public/score-configs?page=1&limit=1');
    expect(page.json.meta).toEqual({ page: 1, limit: 1, totalItems: 2, totalPages: 2 });
    const patched = await call('PATCH', `/api/public/score-configs/${made.json.id}`, {
      categories: [
        { label: 'warm', value: 0 },
        { label: 'curt', value: 1 },
      ],
    });
    expect(patched.status).toBe(200);
    expect(patched.json).toMatchObject({ name: 'tone', dataType: 'CATEGORICAL' });
    expect(
      (await call('PATCH', '/api/public/score-configs/none', { isArchived: true })).status,
    ).toBe(404);
    expect(fake.violations).toEqual([]);
  });

  it('checks a score against the config it names and gives it the config’s name', async () => {
    const config = await call('POST', '/api/public/score-configs', {
      name: 'correct',
      dataType: 'NUMERIC',
      minValue: 0,
      maxValue: 1,
    });
    const base = { traceId: 't', source: 'ANNOTATION', configId: config.json.id };
    const ok = await call('POST', '/api/public/scores', { ...base, name: 'other', value: 0.5 });
    expect(ok.status).toBe(200);
    expect(fake.scores.get(ok.json.id as string)?.name).toBe('correct');
    expect(fake.violations).toEqual([]);
    for (const bad of [
      { name: 'correct', value: 2 },
      { name: 'correct', value: 1, dataType: 'BOOLEAN' },
    ]) {
      fake.violations.length = 0;
      expect((await call('POST', '/api/public/scores', { ...base, ...bad })).status).toBe(400);
      expect(fake.violations).toHaveLength(1);
    }
    fake.violations.length = 0;
    const long = await call('POST', '/api/public/score-configs', {
      name: 'n'.repeat(36),
      dataType: 'BOOLEAN',
    });
    expect(long.status).toBe(400);
  });
});
