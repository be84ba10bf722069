import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, launchServer, type ServerProcess } from '../support/process.js';

/**
 * The Python logging SDK (sdk/python) against the real `touchstone serve` process of this
 * checkout: its pytest suite (logger, client, fork, TLS, exit drain), then `ruff` and
 * `mypy --strict`. Needs TOUCHSTONE_SDK_PYTHON, the python of a venv with
 * sdk/python/requirements-dev.txt (.ci/run makes it); the SDK itself is imported from
 * sdk/python/src. Without it the suite is skipped, except under CI where that is a failure.
 */
const PYTHON = process.env.TOUCHSTONE_SDK_PYTHON || undefined;
const SDK = join(process.cwd(), 'sdk', 'python');
const PROJECT = 'sdk';
const SKIP_REASON =
  'TOUCHSTONE_SDK_PYTHON is not set (the python of a venv with sdk/python/requirements-dev.txt; ' +
  'see sdk/python/README.md)';

interface Run {
  code: number | null;
  output: string;
}

/** Runs a tool of the venv in sdk/python; resolves with its exit code and the tail of its output. */
function runTool(args: string[], env: Record<string, string>, timeoutMs: number): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON as string, args, {
      cwd: SDK,
      env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONPATH: join(SDK, 'src'), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

if (PYTHON === undefined && process.env.CI) {
  describe('Python logging SDK', () => {
    it('has its venv under CI', () => {
      throw new Error(SKIP_REASON);
    });
  });
}

describe.skipIf(PYTHON === undefined)('Python logging SDK against touchstone serve', () => {
  if (PYTHON === undefined) console.log(`skipped: ${SKIP_REASON}`);
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-sdk-python-'));
  const data = join(dir, 'data');
  const caches = {
    MYPY_CACHE_DIR: join(dir, 'mypy-cache'),
    RUFF_CACHE_DIR: join(dir, 'ruff-cache'),
    PYTHONDONTWRITEBYTECODE: '1',
  };
  let server: ServerProcess | undefined;
  let env: Record<string, string> = {};

  beforeAll(async () => {
    writeFileSync(
      join(dir, 'config.yaml'),
      'auth: {}\ntraces:\n  completion_grace: 200ms\nwebhooks:\n  allow_hosts: ["127.0.0.1"]\n',
    );
    const key = (role: string) => createKey(data, PROJECT, role);
    const keys = {
      TOUCHSTONE_TEST_PROJECT: PROJECT,
      TOUCHSTONE_TEST_INGEST_KEY: key('ingest'),
      TOUCHSTONE_TEST_VIEWER_KEY: key('viewer'),
      TOUCHSTONE_TEST_ADMIN_KEY: key('admin'),
      TOUCHSTONE_TEST_DATA_DIR: data,
    };
    const started = await launchServer(data, join(dir, 'config.yaml'));
    server = started.server;
    env = { ...keys, TOUCHSTONE_TEST_URL: started.base };
  }, 120_000);

  afterAll(() => {
    server?.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes its pytest suite', async () => {
    const run = await runTool(
      ['-m', 'pytest', 'tests', '-q', '-p', 'no:cacheprovider'],
      { ...env, ...caches },
      420_000,
    );
    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/\d+ passed/);
    expect(run.output).not.toMatch(/skipped/);
  }, 450_000);

  it('is ruff clean', async () => {
    const lint = await runTool(['-m', 'ruff', 'check', 'src', 'tests'], caches, 60_000);
    expect(lint.code, lint.output).toBe(0);
    const format = await runTool(
      ['-m', 'ruff', 'format', '--check', 'src', 'tests'],
      caches,
      60_000,
    );
    expect(format.code, format.output).toBe(0);
  }, 120_000);

  it('is mypy --strict clean', async () => {
    const run = await runTool(['-m', 'mypy', '--strict', 'src/touchstone'], caches, 240_000);
    expect(run.code, run.output).toBe(0);
  }, 250_000);
});
