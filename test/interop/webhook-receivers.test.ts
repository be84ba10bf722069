import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPEN_PRINCIPAL } from '../../src/auth/index.js';
import { signatureHeader } from '../../src/webhooks/index.js';
import { type TestApp, testApp } from '../support/app.js';

/**
 * The receivers docs/webhooks.md shows, run as they are (Node with the TS client, Node with
 * node:crypto, Python with the standard library) against real deliveries from the dispatcher.
 * The doc includes each file verbatim; the first test keeps them from drifting apart.
 */

const EXAMPLES = 'docs/examples/webhooks';
const SECRET = 'whsec_docs-example-secret-0123456789';
const PYTHON = spawnSync('python3', ['--version']).status === 0 ? 'python3' : undefined;

interface Example {
  file: string;
  command: (path: string) => string[];
  /** Makes the file runnable from this checkout (the client import points at the source). */
  prepare?: (text: string) => string;
}

const EXAMPLES_RUN: Example[] = [
  {
    file: 'receiver-client.mjs',
    command: (p) => [process.execPath, '--import', 'tsx', p],
    prepare: (text) =>
      text.replace(
        "'touchstone/client'",
        `'${pathToFileURL(resolve('src/client/index.ts')).href}'`,
      ),
  },
  { file: 'receiver-node.mjs', command: (p) => [process.execPath, p] },
  { file: 'receiver.py', command: (p) => [PYTHON ?? 'python3', p] },
];

interface Running {
  proc: ChildProcess;
  port: number;
  lines: () => string[];
}

async function startExample(example: Example, dir: string): Promise<Running> {
  let text = readFileSync(join(EXAMPLES, example.file), 'utf8');
  if (example.prepare) text = example.prepare(text);
  const path = join(dir, example.file);
  writeFileSync(path, text);
  const [cmd, ...args] = example.command(path);
  const proc = spawn(cmd as string, args, {
    cwd: resolve('.'),
    env: { ...process.env, WEBHOOK_SECRET: SECRET, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout?.on('data', (d) => {
    out += d;
  });
  proc.stderr?.on('data', (d) => {
    err += d;
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const m = /listening on (\d+)/.exec(out);
    if (m) return { proc, port: Number(m[1]), lines: () => out.trim().split('\n').slice(1) };
    if (Date.now() > deadline || proc.exitCode !== null) {
      throw new Error(`${example.file} did not start:\n${out}\n${err}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('docs/webhooks.md includes every receiver example verbatim', () => {
  it.each(EXAMPLES_RUN.map((e) => e.file))('%s', (file) => {
    const doc = readFileSync('docs/webhooks.md', 'utf8');
    expect(doc).toContain(readFileSync(join(EXAMPLES, file), 'utf8').trimEnd());
  });
});

describe.each(EXAMPLES_RUN)('receiver example $file', (example) => {
  let t: TestApp;
  let dir: string;
  let receiver: Running;

  beforeAll(async () => {
    if (example.file.endsWith('.py') && PYTHON === undefined) {
      throw new Error('python3 is needed to run the documented Python receiver');
    }
    dir = mkdtempSync(join(tmpdir(), 'touchstone-receiver-'));
    receiver = await startExample(example, dir);
    t = await testApp({ webhooks: { allow_hosts: ['127.0.0.1'] } });
    await t.app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'docs',
      url: `http://127.0.0.1:${receiver.port}/webhooks`,
      secret: SECRET,
    });
  });
  afterAll(async () => {
    receiver?.proc.kill();
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const deliveries = async () =>
    (await t.app.webhooks.service.deliveries(OPEN_PRINCIPAL, 'default', 'docs', { pageSize: 10 }))
      .items;

  it('accepts real deliveries and handles each once', async () => {
    await t.app.webhooks.service.test(OPEN_PRINCIPAL, 'default', 'docs');
    await t.app.store.withTransaction((tx) =>
      t.app.webhooks.emitter.emitRunFinished(tx, 'default', {
        id: 'run_docs',
        status: 'RUN_STATUS_SUCCEEDED',
      }),
    );
    await t.app.webhooks.dispatcher.tick();
    const all = await deliveries();
    expect(all.map((d) => [d.event, d.state, d.lastStatus])).toEqual([
      ['run.finished', 'DELIVERED', 204],
      ['ping', 'DELIVERED', 204],
    ]);
    // Sent concurrently: either may arrive first.
    await expect
      .poll(() => [...receiver.lines()].sort())
      .toEqual([`ping ${all[1]?.id}`, `run.finished ${all[0]?.id}`]);
  });

  async function post(body: string, headers: Record<string, string>) {
    const res = await fetch(`http://127.0.0.1:${receiver.port}/webhooks`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', ...headers },
    });
    await res.arrayBuffer();
    return res.status;
  }

  it('refuses a tampered body, a wrong secret, an old timestamp and a missing signature', async () => {
    const now = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({ id: 'whd_manual', type: 'ping', created_at: '', project: 'p' });
    const headers = (signature: string) => ({
      'touchstone-delivery': 'whd_manual',
      'touchstone-event': 'ping',
      'touchstone-signature': signature,
    });
    expect(await post(`${body} `, headers(signatureHeader(SECRET, body, now)))).toBe(400);
    expect(
      await post(body, headers(signatureHeader('whsec_wrong-secret-00000000', body, now))),
    ).toBe(400);
    expect(await post(body, headers(signatureHeader(SECRET, body, now - 301)))).toBe(400);
    expect(await post(body, { 'touchstone-delivery': 'whd_manual' })).toBe(400);
    // Accepted once a valid one arrives; a redelivery with a fresh signature is not handled twice.
    expect(await post(body, headers(signatureHeader(SECRET, body, now - 200)))).toBe(204);
    expect(await post(body, headers(signatureHeader(SECRET, body, now)))).toBe(204);
    await expect
      .poll(() => receiver.lines().filter((l) => l.includes('whd_manual')))
      .toEqual(['ping whd_manual']);
  });
});
