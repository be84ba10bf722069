/**
 * The compiled server as benches measure it: built as `npm run build` does, but into bench/out/
 * (not dist/, which may be in use), and started as `touchstone serve` runs, without the
 * TypeScript loader that running from sources adds (about 50 MB of RSS).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Compiles the server into bench/out/<name>; returns its main.js, or undefined when tsc emitted
 * none. Type errors are reported, and what tsc emitted anyway is measured.
 */
export function buildServer(name: string): string | undefined {
  const out = join(ROOT, 'bench', 'out', name);
  rmSync(out, { recursive: true, force: true });
  const tsc = spawnSync(
    process.execPath,
    [
      join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      'tsconfig.build.json',
      '--outDir',
      out,
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  if (tsc.status !== 0)
    console.log(`(tsc reported errors; measuring what it emitted)\n${tsc.stdout}`);
  const main = join(out, 'main.js');
  return existsSync(main) ? main : undefined;
}

/** Starts `node [NODE_ARGS] <main> serve ARGS` and waits until it listens. */
export async function startBuiltServer(
  main: string,
  args: string[],
  timeoutMs = 30_000,
  nodeArgs: readonly string[] = [],
): Promise<ChildProcess> {
  const proc = spawn(process.execPath, [...nodeArgs, main, 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout?.on('data', (d) => {
    out += d;
  });
  proc.stderr?.on('data', (d) => {
    out += d;
  });
  const deadline = Date.now() + timeoutMs;
  while (!out.includes('listening on')) {
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill('SIGKILL');
      throw new Error(`server did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return proc;
}

/** The server's `touchstone_open_traces` gauge. */
async function openTraces(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const match = /^touchstone_open_traces (\d+)/m.exec(text);
  return match === null ? Number.NaN : Number(match[1]);
}

/** Waits until the server has completed every trace; returns the seconds waited. */
export async function completionTail(base: string, deadlineMs = 600_000): Promise<number> {
  const started = Date.now();
  while ((await openTraces(base)) > 0 && Date.now() - started < deadlineMs) {
    await new Promise((r) => setTimeout(r, 250));
  }
  return (Date.now() - started) / 1000;
}
