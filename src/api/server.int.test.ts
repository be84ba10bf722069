import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';

const json = (body: unknown) => ({
  payload: JSON.stringify(body),
  headers: { 'content-type': 'application/json' },
});

describe('HTTP API without auth (loopback, no auth section)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
  });
  afterAll(() => t.close());

  it('answers health and readiness', async () => {
    expect((await t.app.server.inject({ url: '/healthz' })).json()).toEqual({
      status: 'ok',
      service: 'touchstone',
    });
    const ready = await t.app.server.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready' });
  });

  it('evaluates records with several evaluators', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({
        records: [
          { id: 'a', output: 'Paris', reference: 'paris', usage: { latencyMs: 1200 } },
          { id: 'b', output: 'Lyon', reference: ['Paris', 'PARIS'] },
        ],
        evaluators: [{ ref: 'exact-match' }, { ref: 'latency', params: { thresholdMs: 1000 } }],
      }),
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.results).toHaveLength(2);
    expect(body.results[0].recordId).toBe('a');
    const [em, lat] = body.results[0].results;
    expect(em).toMatchObject({
      evaluator: 'exact-match',
      outcome: 'OUTCOME_SCORED',
      scores: [{ name: 'exact-match', passed: true }],
    });
    expect(lat.outcome).toBe('OUTCOME_SCORED');
    expect(lat.scores).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'latency.within', passed: false })]),
    );
    // Record b has no usage: latency is skipped, never a zero.
    const latB = body.results[1].results[1];
    expect(latB).toMatchObject({ outcome: 'OUTCOME_SKIPPED', scores: [] });
    expect(latB.reason).toMatch(/latency/);
    expect(body.results[1].results[0].scores[0].passed).toBe(false);
  });

  it('skips judge evaluators when no judge is configured', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({
        records: [{ input: 'q', output: 'a' }],
        evaluators: [{ ref: 'llm-judge', params: { rubric: 'helpfulness' } }],
      }),
    });
    expect(res.json().results[0].results[0]).toMatchObject({
      outcome: 'OUTCOME_SKIPPED',
      reason: 'no judge is configured',
    });
  });

  it('answers malformed JSON with 400 and the position, without echoing the body', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      payload: '{"records": [{"output": "sk-live-SECRET"}, }',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(400);
    const err = res.json().error;
    expect(err.code).toBe('BODY_INVALID');
    expect(err.message).toMatch(/line 1, column 44 \(position 43\)/);
    expect(res.body).not.toContain('SECRET');
    expect(err.requestId).toBe(res.headers['x-request-id']);
  });

  it('names an unknown record field', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({
        records: [{ output: 'x' }, { output: 'y', refrence: 'y' }],
        evaluators: [{ ref: 'json-valid' }],
      }),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'RECORD_INVALID',
      kind: 'invalid_argument',
      details: [{ path: 'records[1].refrence', message: 'unknown field' }],
    });
  });

  it('names an unknown evaluator and bad params, validating before evaluating', async () => {
    const unknown = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({
        records: [{ output: 'x' }],
        evaluators: [{ ref: 'json-valid' }, { ref: 'exact-mach' }],
      }),
    });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error).toMatchObject({
      code: 'EVALUATOR_UNKNOWN',
      details: [{ path: 'evaluators[1].ref' }],
    });

    const badRegex = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({
        records: [{ output: 'x' }],
        evaluators: [{ ref: 'regex-match', params: { pattern: '(a)\\1' } }],
      }),
    });
    expect(badRegex.statusCode).toBe(400);
    expect(badRegex.json().error.code).toBe('EVALUATOR_PARAMS_INVALID');
    expect(badRegex.json().error.details[0].path).toBe('evaluators[0].params.pattern');

    const badType = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({
        records: [{ output: 'x' }],
        evaluators: [{ ref: 'latency', params: { thresholdMs: 'soon' } }],
      }),
    });
    expect(badType.statusCode).toBe(400);
    expect(badType.json().error.details[0].path).toBe('evaluators[0].params.thresholdMs');
  });

  it('refuses a body over the limit with 413 naming the limit', async () => {
    const big = JSON.stringify({
      records: [{ output: 'x'.repeat(50 * 1024 * 1024) }],
      evaluators: [{ ref: 'length' }],
    });
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      payload: big,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toMatchObject({ code: 'BODY_TOO_LARGE', kind: 'payload_too_large' });
    expect(res.json().error.message).toContain(String(16 * 1024 * 1024));
  });

  it('refuses other content types with 415 and unknown routes with 404, in the one error body', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      payload: 'a=b',
      headers: { 'content-type': 'text/plain' },
    });
    expect(res.statusCode).toBe(415);
    expect(res.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const missing = await t.app.server.inject({ url: '/v1alpha1/nope' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.code).toBe('ROUTE_NOT_FOUND');
  });

  it('exposes Prometheus metrics for HTTP requests and evaluator outcomes', async () => {
    const res = await t.app.server.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(
      /touchstone_http_requests_total\{method="POST",route="\/v1alpha1\/evaluate",status="200"\} \d+/,
    );
    expect(res.body).toMatch(
      /touchstone_evaluator_results_total\{evaluator="exact-match",outcome="OUTCOME_SCORED"\} [1-9]/,
    );
    expect(res.body).toMatch(
      /touchstone_evaluator_results_total\{evaluator="latency",outcome="OUTCOME_SKIPPED"\} [1-9]/,
    );
    expect(res.body).toContain('touchstone_evaluator_duration_seconds_bucket');
  });

  it('lists evaluator types with their params schema', async () => {
    const res = await t.app.server.inject({ url: '/v1alpha1/evaluators' });
    const types = res.json().evaluators.map((e: { type: string }) => e.type);
    expect(types).toEqual(
      expect.arrayContaining(['exact-match', 'tool-errors', 'llm-judge', 'goal-completion']),
    );
  });
});

describe('judge failures are ERROR results, the others still scored', () => {
  let judge: Server;
  let t: TestApp;
  beforeAll(async () => {
    judge = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          choices: [{ message: { role: 'assistant', content: 'I refuse to answer in JSON' } }],
        }),
      );
    });
    await new Promise<void>((r) => judge.listen(0, '127.0.0.1', r));
    const port = (judge.address() as AddressInfo).port;
    t = await testApp({
      judges: { local: { endpoint: `http://127.0.0.1:${port}/v1`, model: 'm', max_retries: 0 } },
      default_judge: 'local',
    });
  });
  afterAll(async () => {
    await t.close();
    await new Promise((r) => judge.close(r));
  });

  it('garbage from the judge → ERROR with a safe reason', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({
        records: [{ input: 'q', output: 'a', reference: 'a' }],
        evaluators: [
          { ref: 'llm-judge', params: { rubric: 'helpfulness' } },
          { ref: 'exact-match' },
        ],
      }),
    });
    expect(res.statusCode).toBe(200);
    const [judged, exact] = res.json().results[0].results;
    expect(judged.outcome).toBe('OUTCOME_ERROR');
    expect(judged.scores).toEqual([]);
    expect(judged.reason).not.toContain('I refuse');
    expect(exact).toMatchObject({ outcome: 'OUTCOME_SCORED', scores: [{ passed: true }] });
  });

  it('an unknown judge name is a 400 naming the field', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      ...json({ judge: 'nope', records: [{ output: 'a' }], evaluators: [{ ref: 'json-valid' }] }),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'JUDGE_UNKNOWN', details: [{ path: 'judge' }] });
  });
});
