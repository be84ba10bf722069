import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestReceiver } from '../../src/webhooks/receiver.testkit.js';
import {
  cli,
  ENTRY,
  eventually,
  freePort,
  type ServerProcess,
  startServer,
} from '../support/process.js';

/** The CLI without blocking this process, whose receiver must answer while the CLI waits. */
function cliAsync(
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...ENTRY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('webhooks on the real process: CLI, and kill -9 mid-delivery', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-webhooks-e2e-'));
  const dataDir = join(dir, 'data');
  const configFile = join(dir, 'config.yaml');
  let receiver: TestReceiver;
  let server: ServerProcess | undefined;
  let base = '';

  async function start(): Promise<void> {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = await startServer([
      '--data-dir',
      dataDir,
      '--listen',
      `127.0.0.1:${port}`,
      '--config',
      configFile,
    ]);
  }

  const run = (...args: string[]) => {
    const r = cli(['webhook', ...args, '--server', base]);
    return { ...r, json: () => JSON.parse(r.stdout) };
  };

  beforeAll(async () => {
    receiver = await TestReceiver.start();
    writeFileSync(configFile, "webhooks:\n  timeout: 2s\n  allow_hosts: ['127.0.0.1']\n");
    await start();
  });
  afterAll(async () => {
    server?.proc.kill('SIGKILL');
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('applies, lists, gets and tests a webhook through the CLI', async () => {
    const file = join(dir, 'hook.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: touchstone.dev/v1alpha1',
        'kind: Webhook',
        'metadata:',
        '  name: ci',
        'spec:',
        `  url: ${receiver.url}`,
        '  events: [WEBHOOK_EVENT_RUN_FINISHED, WEBHOOK_EVENT_RUN_GATE_FAILED]',
        '',
      ].join('\n'),
    );
    const applied = run('apply', '-f', file, '--json');
    expect(applied.code, applied.stderr).toBe(0);
    const secret = applied.json().secret as string;
    expect(secret).toMatch(/^whsec_/);
    receiver.secret = secret;

    const list = run('list');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^ci\s+default\s+http:\/\/127\.0\.0\.1/m);
    const got = run('get', 'ci');
    expect(JSON.parse(got.stdout)).toMatchObject({ name: 'ci', secretSet: true });
    for (const out of [list.stdout, got.stdout]) expect(out).not.toContain(secret);

    const tested = await cliAsync(['webhook', 'test', 'ci', '--server', base]);
    expect(tested.code, tested.stdout + tested.stderr).toBe(0);
    expect(tested.stdout).toMatch(/ping whd_[0-9a-f]+ to webhook ci: delivered \(HTTP 204\)/);
    expect(receiver.received.map((r) => [r.event, r.verified])).toEqual([['ping', true]]);

    // The local data dir serves the same commands while the server runs.
    const local = cli(['webhook', 'list', '--data-dir', dataDir, '--json']);
    expect(local.code, local.stderr).toBe(0);
    expect(JSON.parse(local.stdout).map((w: { name: string }) => w.name)).toEqual(['ci']);

    const bad = run('apply', '-f', '-');
    expect(bad.code).toBe(2);
    const invalid = join(dir, 'bad.yaml');
    writeFileSync(
      invalid,
      `name: x\nurl: ${receiver.url}\nsecret: too-short\nevents: [run.exploded]\n`,
    );
    const refused = run('apply', '-f', invalid);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('WEBHOOK_INVALID');
    expect(refused.stderr).toContain('run.exploded');
    expect(refused.stderr).toContain('at least 16 characters');
    expect(refused.stderr).not.toContain('too-short');
  }, 90_000);

  it('sends a delivery again after kill -9 mid-attempt, with the same Touchstone-Delivery', async () => {
    receiver.received.length = 0;
    // The receiver takes the first request and never answers: the server is killed meanwhile.
    receiver.respond = () => {};
    const queued = run('test', 'ci', '--wait', '0', '--json');
    expect(queued.code, queued.stderr).toBe(0);
    const id = queued.json().id as string;
    await receiver.waitFor(1);
    server?.proc.kill('SIGKILL');
    await server?.exited;

    receiver.respond = (_req, res) => {
      res.writeHead(200);
      res.end('ok');
    };
    await start();
    // Another process: it waits out the dead one's lease and the lost attempt's deadline.
    await receiver.waitFor(2, 40_000);
    expect(receiver.received.map((r) => r.id)).toEqual([id, id]);
    expect(receiver.received.every((r) => r.verified)).toBe(true);
    const delivery = await eventually(async () => {
      const list = run('deliveries', 'ci', '--json');
      const d = list.json().find((x: { id: string }) => x.id === id);
      return d?.state === 'DELIVERED' ? d : undefined;
    });
    expect(delivery).toMatchObject({ attempts: 2, lastStatus: 200 });
  }, 90_000);

  it('deletes the webhook', { timeout: 30_000 }, () => {
    expect(run('delete', 'ci').stdout).toContain('deleted webhook ci');
    const gone = run('get', 'ci');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('WEBHOOK_NOT_FOUND');
  });
});
