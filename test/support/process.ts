import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Runs the real `touchstone` process: from dist/ when `npm test` has just built it
 * (TOUCHSTONE_TEST_DIST=1; a process then starts without compiling the sources on the fly), else
 * from source through tsx.
 */
const FROM_DIST = process.env.TOUCHSTONE_TEST_DIST === '1';
export const ENTRY = FROM_DIST ? ['dist/main.js'] : ['--import', 'tsx', 'src/main.ts'];

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** ENTRY with absolute paths, for a process started in another working directory. */
export function entryIn(cwd: string | undefined): string[] {
  if (cwd === undefined) return ENTRY;
  if (FROM_DIST) return [fileURLToPath(new URL('../../dist/main.js', import.meta.url))];
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return ['--import', tsx, fileURLToPath(new URL('../../src/main.ts', import.meta.url))];
}

/** Runs `touchstone ARGS` to its end (in `cwd`, by default this checkout). */
export function cli(args: string[], env: Record<string, string> = {}, cwd?: string) {
  const r = spawnSync(process.execPath, [...entryIn(cwd), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 60_000,
    ...(cwd === undefined ? {} : { cwd }),
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `touchstone ARGS` without blocking this process (for a command that calls a stub living
 * here); killed after two minutes.
 */
export function cliAsync(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return startCli(args, env).done;
}

export interface RunningCli {
  done: Promise<CliResult>;
  /** The first match of `pattern` in what the command wrote to stderr so far, once there is one. */
  stderrMatch(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
}

/**
 * Starts `touchstone ARGS` and lets the test act on what it prints while it runs (a code to
 * approve, a URL to open); killed after two minutes.
 */
export function startCli(args: string[], env: Record<string, string> = {}): RunningCli {
  const proc = spawn(process.execPath, [...ENTRY, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d) => {
    stdout += d;
  });
  proc.stderr.on('data', (d) => {
    stderr += d;
  });
  const timer = setTimeout(() => proc.kill('SIGKILL'), 120_000);
  const done = new Promise<CliResult>((resolve, reject) => {
    proc.on('error', reject);
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  return {
    done,
    async stderrMatch(pattern, timeoutMs = 30_000) {
      for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
        const m = pattern.exec(stderr);
        if (m !== null) return m;
        if (proc.exitCode !== null) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`stderr never matched ${pattern}:\n${stderr}\n${stdout}`);
    },
  };
}

/**
 * Runs `touchstone ARGS` on a terminal (util-linux `script` gives it one for stdin, stdout and
 * stderr), as a person at a shell would; `output` is what the terminal showed, both streams.
 */
export function cliOnTerminal(args: string[], env: Record<string, string> = {}, cwd?: string) {
  const quote = (arg: string) => `'${arg.replaceAll("'", `'\\''`)}'`;
  const command = [process.execPath, ...entryIn(cwd ?? process.cwd()), ...args].map(quote);
  const r = spawnSync('script', ['-qec', command.join(' '), '/dev/null'], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 60_000,
    ...(cwd === undefined ? {} : { cwd }),
  });
  return { code: r.status, output: r.stdout };
}

export interface ServerProcess {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts `touchstone serve ARGS` (in `cwd`, by default this checkout) and waits until it listens,
 * for at most `timeoutMs`.
 */
export async function startServer(
  args: string[],
  env: Record<string, string> = {},
  cwd?: string,
  timeoutMs = 30_000,
): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [...entryIn(cwd), 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    ...(cwd === undefined ? {} : { cwd }),
  });
  let out = '';
  proc.stdout?.on('data', (d) => {
    out += d;
  });
  proc.stderr?.on('data', (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + timeoutMs;
  while (!out.includes('listening on')) {
    if (Date.now() > deadline || proc.exitCode !== null)
      throw new Error(`server did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, output: () => out, exited };
}

/** This process's threads (Linux): each one's name and nice value (/proc/self/task/N/stat). */
export function threadsOfThisProcess(): { name: string; nice: number }[] {
  return readdirSync('/proc/self/task').map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    return { name, nice: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]) };
  });
}

/** Polls until `check` returns a value (not undefined) or the deadline passes. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface IngestServer {
  base: string;
  ingestKey: string;
  viewerKey: string;
  stop(): void;
}

/**
 * A real server with auth on and a short completion grace, plus an ingest key (with `labels`) and
 * a viewer key of `project`, made by the CLI on its data dir.
 */
export async function startIngestServer(
  project: string,
  labels: string[] = [],
): Promise<IngestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-interop-'));
  writeFileSync(join(dir, 'config.yaml'), 'auth: {}\ntraces:\n  completion_grace: 200ms\n');
  const data = join(dir, 'data');
  const ingestKey = createKey(data, project, 'ingest', labels);
  const viewerKey = createKey(data, project, 'viewer', labels);
  const { base, server } = await launchServer(data, join(dir, 'config.yaml'));
  return {
    base,
    ingestKey,
    viewerKey,
    stop() {
      server.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Creates an API key with the CLI on a data dir; returns its secret. */
export function createKey(
  dataDir: string,
  project: string,
  role: string,
  labels: string[] = [],
): string {
  const args = ['keys', 'create', '--project', project, '--role', role, '--data-dir', dataDir];
  for (const l of labels) args.push('--label', l);
  const made = cli([...args, '--json']);
  if (made.code !== 0) throw new Error(`keys create failed: ${made.stderr}`);
  return JSON.parse(made.stdout).secret as string;
}

export interface TraceView {
  trace: { service: string; labels: Record<string, string>; error: boolean };
  record: { trajectory: { type: string; name: string; error: string }[] };
}

/** Waits until the server has completed the trace, then returns it. */
export function completedTrace(server: IngestServer, traceId: string): Promise<TraceView> {
  return eventually(async () => {
    const res = await fetch(`${server.base}/v1alpha1/traces/${traceId}`, {
      headers: { authorization: `Bearer ${server.viewerKey}` },
    });
    return res.status === 200 ? ((await res.json()) as TraceView) : undefined;
  });
}

/** A `touchstone serve` process and its base URL. */
export interface RunningServer {
  base: string;
  server: ServerProcess;
}

/** `touchstone serve` arguments: this data dir and config file, listening on a loopback port. */
export function serveArgs(dataDir: string, port: number, configFile: string): string[] {
  return ['--data-dir', dataDir, '--listen', `127.0.0.1:${port}`, '--config', configFile];
}

/** Starts `touchstone serve` on a free loopback port with this data dir and config file. */
export async function launchServer(dataDir: string, configFile: string): Promise<RunningServer> {
  const port = await freePort();
  const server = await startServer(serveArgs(dataDir, port, configFile));
  return { base: `http://127.0.0.1:${port}`, server };
}

/** SIGKILL (no chance to clean up), then waits for the exit; nothing when it already ended. */
export async function kill9(r: RunningServer | undefined): Promise<void> {
  if (r === undefined || r.server.proc.exitCode !== null || r.server.proc.signalCode !== null)
    return;
  r.server.proc.kill('SIGKILL');
  await r.server.exited;
}

/** A JSON request that must answer 200; returns the parsed body. */
export async function callJson(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    ...(body === undefined
      ? {}
      : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
  return JSON.parse(text);
}
