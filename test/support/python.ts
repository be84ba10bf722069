import { spawn } from 'node:child_process';

/** Helpers for the live interop tests that drive a Python venv (MLflow, Phoenix). */

/** Signals a whole process group (a server and its workers); nothing if it is gone. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined || pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/**
 * Runs a Python script of the venv; resolves stdout, rejects with stderr's tail on failure.
 * Asynchronous on purpose: a blocked event loop leaves pooled keep-alive sockets to go stale.
 */
export function runPython(
  python: string,
  args: string[],
  options: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, args, {
      env: { ...process.env, PYTHONUNBUFFERED: '1', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      err = (err + c).slice(-8000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 240_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve(out);
      const tail = err.trim().split('\n').slice(-15).join('\n');
      reject(new Error(`python ${args[0]} failed (${code ?? signal}):\n${tail}`));
    });
  });
}
