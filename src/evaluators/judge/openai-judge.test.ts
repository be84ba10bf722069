import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { JudgeConfigSchema } from '../../config/index.js';
import { isTouchstoneError, type TouchstoneError } from '../../core/index.js';
import { createHttpClient } from '../../net/index.js';
import type { JudgeRequest } from '../contract.js';
import { completion, FakeOpenAi } from './fake-openai.testkit.js';
import { createJudge, createJudges, type JudgeDeps } from './index.js';

const fake = new FakeOpenAi();
const http = createHttpClient();

beforeAll(() => fake.start());
afterAll(async () => {
  await http.close();
  await fake.stop();
});
beforeEach(() => fake.reset());

/** Fast retries so tests measure behaviour, not the production backoff. */
const deps: JudgeDeps = { http, env: {}, retryBaseDelayMs: 5 };

function judgeConfig(over: Record<string, unknown> = {}) {
  return JudgeConfigSchema.parse({ endpoint: fake.endpoint, model: 'gpt-test', ...over });
}

function ask(text: string, over: Partial<JudgeRequest> = {}): JudgeRequest {
  return {
    messages: [
      { role: 'system', content: 'Rate it.' },
      { role: 'user', content: text },
    ],
    promptVersion: 'test/1',
    json: true,
    ...over,
  };
}

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

describe('createJudge', () => {
  it('posts an OpenAI chat completion and maps content, model and usage', async () => {
    const judge = createJudge('main', judgeConfig(), deps);
    const res = await judge.complete(ask('hello', { maxTokens: 50 }));
    expect(res).toEqual({
      content: '{"reasoning":"fine","score":4}',
      model: 'judge-model-2026',
      usage: { inputTokens: 11, outputTokens: 7, totalTokens: 18 },
      cached: false,
    });
    const seen = fake.requests[0];
    expect(seen?.method).toBe('POST');
    expect(seen?.url).toBe('/v1/chat/completions');
    expect(seen?.headers['content-type']).toBe('application/json');
    expect(seen?.body).toEqual({
      model: 'gpt-test',
      messages: ask('hello').messages,
      temperature: 0,
      max_tokens: 50,
      response_format: { type: 'json_object' },
    });
    expect(judge.name).toBe('main');
    expect(judge.model).toBe('gpt-test');
  });

  it('sends no response_format unless JSON is asked for, and passes temperature through', async () => {
    fake.setDefault(completion('plain text answer'));
    const judge = createJudge('main', judgeConfig({ endpoint: `${fake.endpoint}/` }), deps);
    const res = await judge.complete(ask('hello', { json: false, temperature: 0.7 }));
    expect(res.content).toBe('plain text answer');
    expect(fake.requests[0]?.url).toBe('/v1/chat/completions');
    expect(fake.requests[0]?.body).toEqual({
      model: 'gpt-test',
      messages: ask('hello').messages,
      temperature: 0.7,
    });
  });

  it('sends Authorization only when a credential is configured, resolved at each call', async () => {
    const env: Record<string, string | undefined> = { JUDGE_KEY: 'sk-first' };
    const withKey = createJudge('keyed', judgeConfig({ credential: { env: 'JUDGE_KEY' } }), {
      ...deps,
      env,
    });
    await withKey.complete(ask('one'));
    env.JUDGE_KEY = 'sk-rotated';
    await withKey.complete(ask('two'));
    const open = createJudge('open', judgeConfig(), { ...deps, env });
    await open.complete(ask('three'));
    expect(fake.requests.map((r) => r.headers.authorization)).toEqual([
      'Bearer sk-first',
      'Bearer sk-rotated',
      undefined,
    ]);
  });

  it('refuses to call when the credential variable is unset, naming the variable only', async () => {
    const judge = createJudge('keyed', judgeConfig({ credential: { env: 'MISSING_KEY' } }), deps);
    const err = await caught(judge.complete(ask('x')));
    expect(err.code).toBe('JUDGE_CREDENTIAL_MISSING');
    expect(err.kind).toBe('failed_precondition');
    expect(err.message).toContain('MISSING_KEY');
    expect(fake.requests).toHaveLength(0);
  });

  it('answers an identical request from the cache without calling the server', async () => {
    const judge = createJudge('main', judgeConfig(), deps);
    const first = await judge.complete(ask('same'));
    const second = await judge.complete(ask('same'));
    expect(first.cached).toBe(false);
    expect(second).toEqual({ ...first, cached: true });
    expect(fake.requests).toHaveLength(1);
    // Prompt version and params are part of the key.
    await judge.complete(ask('same', { promptVersion: 'test/2' }));
    await judge.complete(ask('same', { temperature: 0.5 }));
    expect(fake.requests).toHaveLength(3);
  });

  it('never caches a sampled answer (temperature above 0)', async () => {
    const judge = createJudge('main', judgeConfig(), deps);
    await judge.complete(ask('sampled', { temperature: 0.8 }));
    const again = await judge.complete(ask('sampled', { temperature: 0.8 }));
    expect(again.cached).toBe(false);
    expect(fake.requests).toHaveLength(2);
  });

  it('does not cache an answer its validator rejects, and validates cached answers too', async () => {
    const judge = createJudge('main', judgeConfig(), deps);
    const reject = () => {
      throw new Error('score out of range');
    };
    await expect(judge.complete(ask('checked', { validate: reject }))).rejects.toThrow(
      'score out of range',
    );
    const seen: string[] = [];
    await judge.complete(ask('checked', { validate: (c) => seen.push(c) }));
    expect(fake.requests).toHaveLength(2);
    const cached = await judge.complete(ask('checked', { validate: (c) => seen.push(c) }));
    expect(cached.cached).toBe(true);
    expect(seen).toHaveLength(2);
  });

  it('keeps the cache bounded, forgetting the least recently used answer', async () => {
    const judge = createJudge('main', judgeConfig(), { ...deps, cacheEntries: 2 });
    await judge.complete(ask('a'));
    await judge.complete(ask('b'));
    await judge.complete(ask('a')); // a is now most recent
    await judge.complete(ask('c')); // evicts b
    expect(fake.requests).toHaveLength(3);
    expect((await judge.complete(ask('a'))).cached).toBe(true);
    expect((await judge.complete(ask('b'))).cached).toBe(false);
    expect(fake.requests).toHaveLength(4);
  });

  it('retries a 500 and succeeds', async () => {
    fake.reply({ status: 500, body: { error: 'boom' } }, { status: 502, body: 'bad gateway' });
    const judge = createJudge('main', judgeConfig({ max_retries: 2 }), deps);
    const res = await judge.complete(ask('x'));
    expect(res.content).toContain('score');
    expect(fake.requests).toHaveLength(3);
  });

  it('gives up after max_retries with a retryable JUDGE_UNAVAILABLE', async () => {
    fake.setDefault({ status: 503, body: 'down' });
    const judge = createJudge('main', judgeConfig({ max_retries: 2 }), deps);
    const err = await caught(judge.complete(ask('x')));
    expect(err.code).toBe('JUDGE_UNAVAILABLE');
    expect(err.retryable).toBe(true);
    expect(fake.requests).toHaveLength(3);
  });

  it('waits as long as Retry-After says before retrying a 429', async () => {
    fake.reply({ status: 429, headers: { 'retry-after': '1' }, body: { error: 'slow down' } });
    const judge = createJudge('main', judgeConfig({ max_retries: 1 }), deps);
    const started = Date.now();
    await judge.complete(ask('x'));
    const [first, second] = fake.requests;
    expect(fake.requests).toHaveLength(2);
    expect((second?.receivedAt ?? 0) - (first?.receivedAt ?? 0)).toBeGreaterThanOrEqual(990);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('reports a Retry-After longer than it may wait instead of sleeping through it', async () => {
    fake.reply({ status: 429, headers: { 'retry-after': '3600' }, body: {} });
    const judge = createJudge('main', judgeConfig({ max_retries: 3 }), deps);
    const err = await caught(judge.complete(ask('x')));
    expect(err.code).toBe('JUDGE_RATE_LIMITED');
    expect(err.kind).toBe('resource_exhausted');
    expect(err.retryAfterSeconds).toBe(3600);
    expect(fake.requests).toHaveLength(1);
  });

  it('times out a slow answer on every attempt with JUDGE_TIMEOUT', async () => {
    fake.setDefault({ ...completion('{"score":1}'), delayMs: 1000 });
    const judge = createJudge('main', judgeConfig({ timeout: '100ms', max_retries: 1 }), deps);
    const started = Date.now();
    const err = await caught(judge.complete(ask('x')));
    expect(err.code).toBe('JUDGE_TIMEOUT');
    expect(err.kind).toBe('deadline_exceeded');
    expect(fake.requests).toHaveLength(2);
    expect(Date.now() - started).toBeLessThan(900);
  });

  it('retries network errors', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const attempts: number[] = [];
    const judge = createJudge(
      'gone',
      judgeConfig({ endpoint: `http://127.0.0.1:${port}/v1`, max_retries: 2 }),
      {
        ...deps,
        sleep: async (ms) => {
          attempts.push(ms);
        },
      },
    );
    const err = await caught(judge.complete(ask('x')));
    expect(err.code).toBe('JUDGE_UNAVAILABLE');
    expect(attempts).toHaveLength(2);
    // Exponential with jitter: the second wait's range sits above the first's.
    expect(attempts[0]).toBeGreaterThanOrEqual(2.5);
    expect(attempts[0]).toBeLessThanOrEqual(5);
    expect(attempts[1]).toBeGreaterThanOrEqual(5);
    expect(attempts[1]).toBeLessThanOrEqual(10);
  });

  it('does not retry a 400, and names only the status', async () => {
    fake.reply({ status: 400, body: { error: { message: 'SECRET-PROMPT-ECHO' } } });
    const judge = createJudge('main', judgeConfig({ max_retries: 3 }), deps);
    const err = await caught(judge.complete(ask('x')));
    expect(err.code).toBe('JUDGE_REQUEST_REFUSED');
    expect(err.message).toContain('400');
    expect(err.message).not.toContain('SECRET-PROMPT-ECHO');
    expect(fake.requests).toHaveLength(1);
  });

  it('does not follow a redirect', async () => {
    fake.reply({ status: 307, headers: { location: '/elsewhere' }, body: '' });
    const judge = createJudge('main', judgeConfig(), deps);
    const err = await caught(judge.complete(ask('x')));
    expect(err.code).toBe('JUDGE_REQUEST_REFUSED');
    expect(fake.requests.map((r) => r.url)).toEqual(['/v1/chat/completions']);
  });

  it('turns garbage into JUDGE_BAD_RESPONSE without echoing it, and caches nothing', async () => {
    const garbage = 'GARBAGE-<html>sk-leaked-token</html>';
    fake.reply({ body: garbage });
    const judge = createJudge('main', judgeConfig(), deps);
    const notJson = await caught(judge.complete(ask('x')));
    expect(notJson.code).toBe('JUDGE_BAD_RESPONSE');
    expect(notJson.retryable).toBe(false);
    expect(notJson.message).not.toContain('GARBAGE');
    expect(notJson.message).not.toContain('sk-leaked-token');

    fake.reply({ body: { choices: [{ message: { content: null } }], note: 'GARBAGE' } });
    const wrongShape = await caught(judge.complete(ask('x')));
    expect(wrongShape.code).toBe('JUDGE_BAD_RESPONSE');
    expect(wrongShape.message).toContain('choices.0.message.content');
    expect(wrongShape.message).not.toContain('GARBAGE');

    fake.reply(completion('GARBAGE not an object'));
    const notAnObject = await caught(judge.complete(ask('x')));
    expect(notAnObject.code).toBe('JUDGE_BAD_RESPONSE');
    expect(notAnObject.message).not.toContain('GARBAGE');

    // None of the failures was cached: the next call reaches the server and succeeds.
    const ok = await judge.complete(ask('x'));
    expect(ok.cached).toBe(false);
    expect(fake.requests).toHaveLength(4);
  });

  it('accepts a JSON object wrapped in a ```json fence', async () => {
    fake.reply(completion('Here you go:\n```json\n{"reasoning":"r","score":5}\n```'));
    const judge = createJudge('main', judgeConfig(), deps);
    expect((await judge.complete(ask('x'))).content).toContain('"score":5');
  });

  it('never has more than max_concurrency requests in flight', async () => {
    fake.setDefault({ ...completion('{"score":3}'), delayMs: 80 });
    const judge = createJudge(
      'main',
      judgeConfig({ max_concurrency: 2, requests_per_second: 1000 }),
      deps,
    );
    await Promise.all(Array.from({ length: 6 }, (_, i) => judge.complete(ask(`c${i}`))));
    expect(fake.requests).toHaveLength(6);
    expect(fake.maxInFlight).toBe(2);
  });

  it('paces requests to requests_per_second after the initial burst', async () => {
    const judge = createJudge(
      'main',
      judgeConfig({ max_concurrency: 50, requests_per_second: 10 }),
      deps,
    );
    await Promise.all(Array.from({ length: 15 }, (_, i) => judge.complete(ask(`r${i}`))));
    const times = fake.requests.map((r) => r.receivedAt);
    const span = Math.max(...times) - Math.min(...times);
    // Burst of 10, then 5 more at 10 per second: about 500 ms.
    expect(span).toBeGreaterThanOrEqual(450);
    expect(span).toBeLessThan(2000);
  });

  it("stops waiting when the caller's signal aborts", async () => {
    fake.setDefault({ ...completion('{"score":3}'), delayMs: 2000 });
    const judge = createJudge('main', judgeConfig({ max_concurrency: 1 }), deps);
    const controller = new AbortController();
    const first = judge.complete(ask('a'), controller.signal);
    const queued = judge.complete(ask('b'), controller.signal);
    setTimeout(() => controller.abort(new Error('cancelled')), 50);
    await expect(first).rejects.toThrow('cancelled');
    await expect(queued).rejects.toThrow('cancelled');
    expect(fake.requests).toHaveLength(1);
  });
});

describe('createJudges', () => {
  it('builds one judge per configured name', () => {
    const judges = createJudges(
      { fast: judgeConfig({ model: 'small' }), strict: judgeConfig({ model: 'large' }) },
      deps,
    );
    expect([...judges.keys()]).toEqual(['fast', 'strict']);
    expect(judges.get('strict')?.model).toBe('large');
    expect(judges.get('fast')?.name).toBe('fast');
  });
});
