import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, freePort, startServer } from '../support/process.js';

describe('touchstone serve (real process, embedded SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-e2e-'));
  let base: string;
  let server: Awaited<ReturnType<typeof startServer>>;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    writeFileSync(join(dir, 'auth.yaml'), 'auth: {}\n');
    server = await startServer([
      '--data-dir',
      join(dir, 'data'),
      '--listen',
      `127.0.0.1:${port}`,
      '--config',
      join(dir, 'auth.yaml'),
    ]);
  });
  afterAll(() => {
    server?.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('is healthy and ready', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
  });

  it('requires a key; the first one is made by the CLI on the local data dir while the server runs', async () => {
    expect((await fetch(`${base}/v1alpha1/evaluators`)).status).toBe(401);
    const created = cli([
      'keys',
      'create',
      '--project',
      'demo',
      '--role',
      'admin',
      '--data-dir',
      join(dir, 'data'),
      '--json',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const { secret } = JSON.parse(created.stdout);
    const res = await fetch(`${base}/v1alpha1/evaluate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        records: [{ output: 'Paris', reference: 'paris' }],
        evaluators: [{ ref: 'exact-match' }],
      }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      results: { results: { scores: { passed: boolean }[] }[] }[];
    };
    expect(body.results[0]?.results[0]?.scores[0]?.passed).toBe(true);

    // The CLI against the server: list keys, evaluate a JSONL file with params.
    const env = { TOUCHSTONE_API_KEY: secret };
    const listed = cli(['keys', 'list', '--server', base], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/demo\s+admin/);
    expect(listed.stdout).not.toContain(secret);

    const file = join(dir, 'records.jsonl');
    writeFileSync(
      file,
      `${JSON.stringify({ id: 'a', output: 'Paris', reference: 'Paris', usage: { latencyMs: 2500 } })}\n${JSON.stringify({ id: 'b', output: 'Rome', reference: 'Paris' })}\n`,
    );
    const evaluated = cli(
      [
        'evaluate',
        '-f',
        file,
        '-e',
        'exact-match',
        '-e',
        'latency:thresholdMs=2000',
        '--server',
        base,
      ],
      env,
    );
    expect(evaluated.code, evaluated.stderr).toBe(0);
    expect(evaluated.stdout).toMatch(/a\s+exact-match\s+SCORED\s+exact-match=pass/);
    expect(evaluated.stdout).toMatch(/a\s+latency\s+SCORED\s+latency=2500 latency\.within=fail/);
    expect(evaluated.stdout).toMatch(/b\s+latency\s+SKIPPED/);
    expect(evaluated.stdout).toMatch(/exact-match\s+0\.5000\s+2/);

    const bad = cli(
      ['evaluate', '-f', file, '-e', 'regex-match:pattern=(a)\\1', '--server', base],
      env,
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('evaluators[0].params.pattern');
  });

  it.runIf(process.platform === 'linux')(
    'runs in the process it was started as, with the heap limits it sets itself',
    () => {
      // src/main.ts starts `serve` again in the same process (execve) with V8's heap limits and
      // malloc's fixed threshold for mapping large blocks.
      const argv = readFileSync(`/proc/${server.proc.pid}/cmdline`, 'utf8').split('\0');
      expect(argv).toContain('--max-semi-space-size=16');
      expect(argv).toContain('--max-old-space-size=1024');
      expect(argv).toContain('--heap-growing-percent=20');
      expect(argv).toContain('serve');
      const env = readFileSync(`/proc/${server.proc.pid}/environ`, 'utf8').split('\0');
      expect(env).toContain('MALLOC_MMAP_THRESHOLD_=131072');
    },
  );

  it('shuts down gracefully on SIGTERM with exit code 0', async () => {
    server.proc.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });
});

describe('touchstone CLI without a server', () => {
  it('evaluates a local JSONL file in process and prints JSON', () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-e2e-'));
    const file = join(dir, 'r.jsonl');
    writeFileSync(file, '{"output": "{\\"a\\": 1}"}\n');
    const r = cli(['evaluate', '-f', file, '-e', 'json-valid', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).results[0].results[0]).toMatchObject({
      evaluator: 'json-valid',
      outcome: 'OUTCOME_SCORED',
    });
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses to start off loopback without auth (exit 1), reporting every bad key with its path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-e2e-'));
    writeFileSync(
      join(dir, 'c.yaml'),
      'store:\n  driver: mysql\nlimits:\n  max_body_bytes: nope\n',
    );
    const r = cli([
      'serve',
      '--listen',
      '0.0.0.0:0',
      '--config',
      join(dir, 'c.yaml'),
      '--data-dir',
      dir,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('auth:');
    expect(r.stderr).toContain('store.driver:');
    expect(r.stderr).toContain('limits.max_body_bytes:');
    rmSync(dir, { recursive: true, force: true });
  });

  it.runIf(process.platform === 'linux')(
    'leaves a heap limit given in NODE_OPTIONS, and a malloc threshold given, to them',
    async () => {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), 'touchstone-e2e-'));
      const server = await startServer(['--data-dir', dir, '--listen', `127.0.0.1:${port}`], {
        NODE_OPTIONS: '--max-old-space-size=2048',
        MALLOC_MMAP_THRESHOLD_: '262144',
      });
      try {
        const argv = readFileSync(`/proc/${server.proc.pid}/cmdline`, 'utf8').split('\0');
        expect(argv).toContain('--max-semi-space-size=16');
        expect(argv.some((arg) => arg.startsWith('--max-old-space-size'))).toBe(false);
        const env = readFileSync(`/proc/${server.proc.pid}/environ`, 'utf8').split('\0');
        expect(env).toContain('MALLOC_MMAP_THRESHOLD_=262144');
      } finally {
        server.proc.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('answers usage errors with exit code 2', () => {
    expect(cli(['evaluate']).code).toBe(2);
    expect(cli(['frobnicate']).code).toBe(2);
  });
});
