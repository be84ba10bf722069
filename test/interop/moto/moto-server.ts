import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../../support/process.js';
import { killGroup, runPython } from '../../support/python.js';

/**
 * moto's S3-compatible server for the S3 dataset-root test, run from the venv that
 * TOUCHSTONE_INTEROP_MOTO_PYTHON points at (requirements.txt here; .ci/run makes it). It binds
 * 127.0.0.1 only and stops by itself when our stdin pipe closes; `stop()` also kills it.
 * Signatures are checked (IAM on) after the four set-up requests of `s3_admin.py setup`.
 */

export const MOTO_PYTHON = process.env.TOUCHSTONE_INTEROP_MOTO_PYTHON || undefined;

export const MOTO_SKIP_REASON =
  'TOUCHSTONE_INTEROP_MOTO_PYTHON is not set (the python of a venv with ' +
  'test/interop/moto/requirements.txt; see test/interop/moto/README.md)';

const HERE = join(process.cwd(), 'test', 'interop', 'moto');

export interface MotoServer {
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Runs s3_admin.py (boto3) with the server's credentials. */
  admin(args: string[]): Promise<string>;
  stop(): Promise<void>;
}

export async function startMotoServer(python: string, bucket: string): Promise<MotoServer> {
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(python, [join(HERE, 'serve.py'), String(port), '900'], {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONUNBUFFERED: '1', INITIAL_NO_AUTH_ACTION_COUNT: '4' },
  });
  let log = '';
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString('utf8')).slice(-4000);
      if (log.includes('ready')) resolve();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString('utf8')).slice(-4000);
    });
    child.once('exit', () => reject(new Error(`moto server exited during start-up:\n${log}`)));
    child.once('error', reject);
  });
  const onExit = () => killGroup(child.pid, 'SIGKILL');
  process.once('exit', onExit);
  const stop = async () => {
    process.removeListener('exit', onExit);
    child.stdin?.end();
    killGroup(child.pid, 'SIGTERM');
    setTimeout(() => killGroup(child.pid, 'SIGKILL'), 5000).unref();
  };
  const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), 60_000);
  try {
    await ready;
  } catch (err) {
    await stop();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const script = join(HERE, 's3_admin.py');
  const keys = JSON.parse(
    (await runPython(python, [script, endpoint, 'setup', bucket])).trim().split('\n').at(-1) ??
      '{}',
  ) as { access_key_id: string; secret_access_key: string };
  return {
    endpoint,
    bucket,
    accessKeyId: keys.access_key_id,
    secretAccessKey: keys.secret_access_key,
    admin: (args) =>
      runPython(python, [script, endpoint, ...args], {
        env: {
          AWS_ACCESS_KEY_ID: keys.access_key_id,
          AWS_SECRET_ACCESS_KEY: keys.secret_access_key,
        },
        timeoutMs: 60_000,
      }),
    stop,
  };
}
