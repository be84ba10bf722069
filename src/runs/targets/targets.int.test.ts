import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OpenAiStub } from '../../../test/support/openai-stub.js';
import { createCredentialResolver } from '../../net/index.js';
import type { TargetDeps } from './contract.js';
import { createTarget } from './create.js';
import {
  type EnvironmentInput,
  EnvironmentSchema,
  HarnessSchema,
  type TargetSpecInput,
  TargetSpecSchema,
} from './schema.js';

/** Deps of a spec run on the caller's own machine (the CLI's embedded mode). */
const local: TargetDeps = {
  project: 'p',
  env: { PATH: process.env.PATH, STUB_KEY: 'sk-local-123', AGENT_TOKEN: 'tok-abcdef' },
  grants: 'all',
  allowCommand: true,
  outbound: { allowOwnHost: true },
  retryBaseDelayMs: 5,
};

function build(
  target: TargetSpecInput,
  harness: 'single-turn' | 'chat' = 'single-turn',
  environment: EnvironmentInput = {},
  deps: TargetDeps = local,
) {
  return createTarget(
    TargetSpecSchema.parse(target),
    HarnessSchema.parse(harness),
    EnvironmentSchema.parse(environment),
    deps,
  );
}

async function failure(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code: string; message: string };
  }
  throw new Error('expected a failure');
}

describe('openai-compatible target', () => {
  const stub = new OpenAiStub();
  let baseUrl: string;
  beforeAll(async () => {
    baseUrl = await stub.start();
  });
  afterAll(() => stub.stop());
  afterEach(() => {
    stub.requests.length = 0;
    stub.answer = (u) => `echo: ${u}`;
  });

  it('sends the system prompt, input, params and key; returns content, an llm step and usage', async () => {
    const target = await build({
      kind: 'openai-compatible',
      baseUrl,
      model: 'agent-1',
      apiKeyEnv: 'STUB_KEY',
      systemPrompt: 'Be brief.',
      params: { temperature: 0.3, max_tokens: 20 },
    });
    const out = await target.generate({
      record: { id: 'r1', input: 'Capital of France?' },
      trial: 0,
    });
    expect(out.output).toBe('echo: Capital of France?');
    expect(out.usage).toMatchObject({ inputTokens: 10, outputTokens: 3, totalTokens: 13 });
    expect(out.trajectory?.[0]).toMatchObject({ type: 'llm', model: 'agent-1' });
    const seen = stub.requests[0];
    expect(seen?.headers.authorization).toBe('Bearer sk-local-123');
    expect(seen?.body).toEqual({
      temperature: 0.3,
      max_tokens: 20,
      model: 'agent-1',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Capital of France?' },
      ],
    });
    // A JSON input is sent as its text.
    await target.generate({ record: { input: { q: 1 } }, trial: 0 });
    expect(stub.requests[1]?.body.messages?.at(-1)).toEqual({ role: 'user', content: '{"q":1}' });
    await target.close();
    await target.close();
  });

  it('replays a chat turn by turn with its own replies in place of the recorded ones', async () => {
    stub.answer = (u) => `A(${u})`;
    const target = await build({ kind: 'openai-compatible', baseUrl, model: 'm' }, 'chat');
    const out = await target.generate({
      record: {
        input: [
          { role: 'system', content: 'S' },
          { role: 'user', content: 'one' },
          { role: 'assistant', content: 'recorded reply' },
          { role: 'user', content: 'two' },
        ],
      },
      trial: 0,
    });
    expect(out.output).toBe('A(two)');
    expect(out.trajectory).toHaveLength(2);
    expect(stub.requests.map((r) => r.body.messages)).toEqual([
      [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'one' },
      ],
      [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'one' },
        { role: 'assistant', content: 'A(one)' },
        { role: 'user', content: 'two' },
      ],
    ]);
    expect(out.usage?.totalTokens).toBe(26);
    const bad = await failure(target.generate({ record: { input: 'not a chat' }, trial: 0 }));
    expect(bad.code).toBe('TARGET_INPUT_INVALID');
    await target.close();
  });

  it('drops trailing slashes of the base URL, and builds at once from one full of slashes', async () => {
    stub.answer = () => 'ok';
    const slashed = await build({
      kind: 'openai-compatible',
      baseUrl: `${baseUrl}///`,
      model: 'm',
    });
    expect((await slashed.generate({ record: { input: 'x' }, trial: 0 })).output).toBe('ok');
    await slashed.close();
    const started = performance.now();
    const hostile = await build({
      kind: 'openai-compatible',
      baseUrl: `${baseUrl}${'/'.repeat(200_000)}v1`,
      model: 'm',
    });
    expect(performance.now() - started).toBeLessThan(1_000);
    await hostile.close();
  });

  it('retries 429 honouring Retry-After, then reports the status', async () => {
    stub.answer = (_u, seen) => (seen === 0 ? { status: 429, retryAfter: '0' } : 'ok');
    const target = await build({ kind: 'openai-compatible', baseUrl, model: 'm' });
    expect((await target.generate({ record: { input: 'x' }, trial: 0 })).output).toBe('ok');
    stub.answer = () => ({ status: 500 });
    const err = await failure(target.generate({ record: { input: 'y' }, trial: 0 }));
    expect(err.code).toBe('TARGET_REQUEST_FAILED');
    expect(err.message).toMatch(/HTTP 500 after 3 attempts/);
    await target.close();
  });

  it('times out per call, rejects non-completions, and needs its key variable set', async () => {
    stub.answer = () => ({ content: 'late', delayMs: 2000 });
    const slow = await build({ kind: 'openai-compatible', baseUrl, model: 'm', timeout: '200ms' });
    const started = Date.now();
    expect((await failure(slow.generate({ record: { input: 'x' }, trial: 0 }))).code).toBe(
      'TARGET_TIMEOUT',
    );
    expect(Date.now() - started).toBeLessThan(1500);
    await slow.close();

    stub.answer = () => ({ raw: 'secret-ish <html>' });
    const target = await build({ kind: 'openai-compatible', baseUrl, model: 'm' });
    const bad = await failure(target.generate({ record: { input: 'x' }, trial: 0 }));
    expect(bad.code).toBe('TARGET_BAD_RESPONSE');
    expect(bad.message).not.toContain('secret-ish');
    await target.close();

    const keyless = await build(
      { kind: 'openai-compatible', baseUrl, model: 'm', apiKeyEnv: 'UNSET_VAR' },
      'single-turn',
      {},
    );
    expect((await failure(keyless.generate({ record: { input: 'x' }, trial: 0 }))).code).toBe(
      'CREDENTIAL_UNREADABLE',
    );
    await keyless.close();
  });

  it('on a server: loopback is refused unless allow-listed, and keys must be granted', async () => {
    const grants = createCredentialResolver({
      env: {},
      dir: tmpdir(),
      grants: [{ env: 'STUB_KEY', projects: ['p'], hosts: ['127.0.0.1'] }],
    });
    const server: TargetDeps = { project: 'p', env: local.env, grants };
    const refused = await failure(
      build({ kind: 'openai-compatible', baseUrl, model: 'm' }, 'single-turn', {}, server),
    );
    expect(refused.code).toBe('OUTBOUND_TARGET_REFUSED');
    expect(refused.message).toContain('runs.allow_hosts');

    const allowed: TargetDeps = { ...server, outbound: { allowHosts: ['127.0.0.1'] } };
    const ok = await build(
      { kind: 'openai-compatible', baseUrl, model: 'm', apiKeyEnv: 'STUB_KEY' },
      'single-turn',
      {},
      allowed,
    );
    expect((await ok.generate({ record: { input: 'x' }, trial: 0 })).output).toBe('echo: x');
    await ok.close();
    const other = await failure(
      build(
        { kind: 'openai-compatible', baseUrl, model: 'm', apiKeyEnv: 'STUB_KEY' },
        'single-turn',
        {},
        { ...allowed, project: 'q' },
      ),
    );
    expect(other.code).toBe('CREDENTIAL_NOT_GRANTED');
    expect(other.message).toContain('project "q"');
    expect(other.message).not.toContain('sk-local-123');
  });
});

describe('http target', () => {
  let server: Server;
  let base: string;
  const seen: { headers: Record<string, unknown>; body: string; url: string }[] = [];
  let reply: (body: string) => { status?: number; body: string; type?: string } = (b) => ({
    body: JSON.stringify({ data: { answer: JSON.parse(b) } }),
  });

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        seen.push({ headers: req.headers, body, url: req.url ?? '' });
        const r = reply(body);
        res
          .writeHead(r.status ?? 200, { 'content-type': r.type ?? 'application/json' })
          .end(r.body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  afterEach(() => {
    seen.length = 0;
  });

  it('fills the template, sends env headers, reads the output path', async () => {
    const target = await build({
      kind: 'http',
      url: `${base}/agent`,
      headers: { Authorization: { env: 'AGENT_TOKEN', prefix: 'Bearer ' }, 'X-Suite': 'smoke' },
      bodyTemplate: '{"question": {{input}}, "note": "record {{recordId}} trial {{trial}}"}',
      outputPath: '$.data.answer.question',
    });
    const out = await target.generate({ record: { id: 'r"7', input: 'why "so"?' }, trial: 1 });
    expect(out.output).toBe('why "so"?');
    expect(out.usage?.latencyMs).toBeGreaterThanOrEqual(0);
    expect(seen[0]?.headers.authorization).toBe('Bearer tok-abcdef');
    expect(seen[0]?.headers['x-suite']).toBe('smoke');
    expect(JSON.parse(seen[0]?.body ?? '')).toEqual({
      question: 'why "so"?',
      note: 'record r"7 trial 1',
    });
    await target.close();
  });

  it('chat sends the conversation so far as {{input}}', async () => {
    reply = (b) => ({ body: JSON.stringify({ reply: `n=${JSON.parse(b).input.length}` }) });
    const target = await build({ kind: 'http', url: base, outputPath: '$.reply' }, 'chat');
    const out = await target.generate({
      record: {
        input: [
          { role: 'user', content: 'a' },
          { role: 'user', content: 'b' },
        ],
      },
      trial: 0,
    });
    expect(out.output).toBe('n=3');
    expect(out.trajectory?.map((s) => s.type)).toEqual(['agent', 'agent']);
    await target.close();
  });

  it('takes a text answer with path $, and names what is wrong otherwise', async () => {
    reply = () => ({ body: 'plain words', type: 'text/plain' });
    const text = await build({ kind: 'http', url: base });
    expect((await text.generate({ record: { input: 'x' }, trial: 0 })).output).toBe('plain words');
    const pathed = await build({ kind: 'http', url: base, outputPath: '$.a' });
    const notJson = await failure(pathed.generate({ record: { input: 'x' }, trial: 0 }));
    expect(notJson.code).toBe('TARGET_BAD_RESPONSE');
    expect(notJson.message).not.toContain('plain words');
    reply = () => ({ body: '{"b": 1}' });
    const missing = await failure(pathed.generate({ record: { input: 'x' }, trial: 0 }));
    expect(missing.message).toMatch(/outputPath \$\.a matched nothing/);
    reply = () => ({ status: 400, body: '{"error": "no"}' });
    const status = await failure(pathed.generate({ record: { input: 'x' }, trial: 0 }));
    expect(status.code).toBe('TARGET_REQUEST_FAILED');
    expect(status.message).toMatch(/HTTP 400 after 1 attempt\b/);
    await Promise.all([text.close(), pathed.close()]);
  });

  it('caps the answer size', async () => {
    reply = () => ({ body: JSON.stringify({ big: 'x'.repeat(5000) }) });
    const target = await build(
      { kind: 'http', url: base },
      'single-turn',
      {},
      {
        ...local,
        maxOutputBytes: 1024,
      },
    );
    expect((await failure(target.generate({ record: { input: 'x' }, trial: 0 }))).code).toBe(
      'TARGET_OUTPUT_TOO_LARGE',
    );
    await target.close();
  });
});

describe('command target', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-command-'));
  const script = (name: string, body: string) => {
    const file = join(dir, name);
    writeFileSync(file, body);
    return file;
  };
  const node = process.execPath;
  const upper = script(
    'upper.mjs',
    `let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{process.stdout.write(s.toUpperCase()+'\\n')});`,
  );
  const envDump = script(
    'env.mjs',
    `process.stdout.write(JSON.stringify({env:process.env,cwd:process.cwd()}));`,
  );
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('pipes the input through the program (text, json and record modes)', async () => {
    const target = await build({ kind: 'command', argv: [node, upper] });
    const out = await target.generate({ record: { input: 'hello' }, trial: 0 });
    expect(out.output).toBe('HELLO');
    const record = script(
      'record.mjs',
      `process.stdout.write(JSON.stringify({output:'done',trajectory:[{type:'tool',name:'search'}],usage:{inputTokens:4}}));`,
    );
    const rec = await build({ kind: 'command', argv: [node, record], stdout: 'record' });
    const r = await rec.generate({ record: { input: 'x' }, trial: 0 });
    expect(r.output).toBe('done');
    expect(r.trajectory?.[0]).toMatchObject({ type: 'tool', name: 'search' });
    expect(r.usage).toEqual({ inputTokens: 4 });
    expect(out.usage?.latencyMs).toBeGreaterThan(0);
    const json = await build({ kind: 'command', argv: [node, upper], stdout: 'json' });
    expect((await json.generate({ record: { input: '[1,2]' }, trial: 0 })).output).toEqual([1, 2]);
    const notJson = await failure(json.generate({ record: { input: 'abc' }, trial: 0 }));
    expect(notJson.code).toBe('TARGET_BAD_RESPONSE');
    expect(notJson.message).not.toContain('ABC');
  });

  it('gives the process only PATH, the granted variables and the call ids, in its working directory', async () => {
    const target = await build(
      { kind: 'command', argv: [node, envDump], stdout: 'json' },
      'single-turn',
      { env: ['AGENT_TOKEN', 'NOT_SET_ANYWHERE'], workingDirectory: '.' },
      { ...local, env: { ...local.env, OTHER_SECRET: 'x' }, baseDir: dir },
    );
    const out = (await target.generate({ record: { id: 'r9', input: '' }, trial: 2 })).output as {
      env: Record<string, string>;
      cwd: string;
    };
    expect(Object.keys(out.env).sort()).toEqual(
      ['AGENT_TOKEN', 'PATH', 'TOUCHSTONE_RECORD_ID', 'TOUCHSTONE_TRIAL'].sort(),
    );
    expect(out.env.TOUCHSTONE_TRIAL).toBe('2');
    expect(out.cwd).toBe(dir);
  });

  it('kills the process group on timeout', async () => {
    const pidFile = join(dir, 'grandchild.pid');
    const hang = script(
      'hang.mjs',
      `import {spawn} from 'node:child_process';import {writeFileSync} from 'node:fs';
const c=spawn(process.execPath,['-e','setInterval(()=>{},1000)'],{stdio:'ignore'});
writeFileSync(${JSON.stringify(pidFile)},String(c.pid));setInterval(()=>{},1000);`,
    );
    const target = await build({ kind: 'command', argv: [node, hang], timeout: '700ms' });
    const started = Date.now();
    const err = await failure(target.generate({ record: { input: '' }, trial: 0 }));
    expect(err.code).toBe('TARGET_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(5000);
    const { readFileSync } = await import('node:fs');
    const pid = Number(readFileSync(pidFile, 'utf8'));
    // Gone, or a zombie waiting for a parent that does not reap: either way it no longer runs.
    await new Promise((r) => setTimeout(r, 100));
    let state = 'gone';
    try {
      state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] ?? 'gone';
    } catch {}
    expect(['gone', 'Z', 'X']).toContain(state);
  });

  it('reports exit status with a short masked stderr excerpt, missing programs and big output', async () => {
    const fail = script(
      'fail.mjs',
      `process.stdout.write('partial output');console.error('line one\\nauth failed with tok-abcdef \\u001b[31m'+'y'.repeat(400));process.exit(4);`,
    );
    const target = await build({ kind: 'command', argv: [node, fail] }, 'single-turn', {
      env: ['AGENT_TOKEN'],
    });
    const err = await failure(target.generate({ record: { input: '' }, trial: 0 }));
    expect(err.code).toBe('TARGET_COMMAND_FAILED');
    expect(err.message).toMatch(/exited with status 4 \(stderr: auth failed with \*\*\* /);
    expect(err.message).not.toContain('tok-abcdef');
    expect(err.message).not.toContain('partial output');
    expect(err.message).not.toContain('line one');
    // The excerpt is bounded (200 characters and an ellipsis), whatever the program's path adds.
    const excerpt = /\(stderr: (.*)\)$/s.exec(err.message)?.[1] ?? '';
    expect(excerpt).toMatch(/^auth failed with \*\*\* .*y…$/);
    expect(excerpt.length).toBe(201);

    const missing = await build({ kind: 'command', argv: ['/no/such/program'] });
    expect((await failure(missing.generate({ record: { input: '' }, trial: 0 }))).code).toBe(
      'TARGET_COMMAND_NOT_FOUND',
    );
    const flood = script('flood.mjs', `process.stdout.write('z'.repeat(1<<20));`);
    const big = await build(
      { kind: 'command', argv: [node, flood] },
      'single-turn',
      {},
      {
        ...local,
        maxOutputBytes: 4096,
      },
    );
    expect((await failure(big.generate({ record: { input: '' }, trial: 0 }))).code).toBe(
      'TARGET_OUTPUT_TOO_LARGE',
    );
  });

  it('is refused where commands are not allowed, and needs granted variables and a real directory', async () => {
    const server: TargetDeps = {
      project: 'p',
      env: local.env,
      grants: createCredentialResolver({
        env: {},
        dir: tmpdir(),
        grants: [{ env: 'AGENT_TOKEN', projects: ['p'] }],
      }),
    };
    expect(
      (await failure(build({ kind: 'command', argv: [node, upper] }, 'single-turn', {}, server)))
        .code,
    ).toBe('TARGET_COMMAND_DISABLED');
    const allowed = { ...server, allowCommand: true };
    const notGranted = await failure(
      build(
        { kind: 'command', argv: [node, upper] },
        'single-turn',
        { env: ['AGENT_TOKEN', 'STUB_KEY'] },
        allowed,
      ),
    );
    expect(notGranted.code).toBe('CREDENTIAL_NOT_GRANTED');
    expect(
      (notGranted as unknown as { details: { path: string }[] }).details.map((d) => d.path),
    ).toEqual(['environment.env[1]']);
    const noDir = await failure(
      build(
        { kind: 'command', argv: [node, upper] },
        'single-turn',
        { workingDirectory: join(dir, 'nope') },
        allowed,
      ),
    );
    expect(noDir.code).toBe('TARGET_COMMAND_NOT_FOUND');
    expect(noDir.message).toMatch(/workingDirectory does not exist/);
  });
});

describe('no target', () => {
  it('hands back the dataset outputs', async () => {
    const target = await createTarget(undefined, 'single-turn', EnvironmentSchema.parse({}), local);
    expect(target.kind).toBe('none');
    expect(await target.generate({ record: { input: 'q', output: 'a' }, trial: 0 })).toEqual({
      output: 'a',
    });
  });
});
