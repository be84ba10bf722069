/**
 * Process entry: the only module that reads `process.env` or calls `process.exit`. The environment
 * is handed on whole: config reads `TOUCHSTONE_*` and the standard `HTTPS_PROXY` / `HTTP_PROXY` /
 * `NO_PROXY` (into `proxy.*`) from it, and credential references (`{env: VAR}`) resolve against it.
 */
import { enableCompileCache } from 'node:module';

/**
 * V8 heap limits the server runs with unless told otherwise (on the command line or in
 * NODE_OPTIONS), since the defaults are sized for the machine rather than for the server's
 * memory budget. Node 24 gives the young generation 32 MB semi-spaces on a large machine (Node 22
 * 16 MB): a 300 MB budget loses 64 MB to garbage not yet scavenged. And under Node's default old
 * generation limit (about a quarter of the machine's memory, over 2 GB here) V8 lets the old
 * generation grow to 4× its live size before collecting it, 1.6× under 1 GB; the server's live
 * heap is under 100 MB. Under the 80-connection overload test on Node 24 the peak RSS went from
 * 401–502 MB to about 320 (docs/performance.md, "Memory"). A heap over 1 GB would end the process;
 * `NODE_OPTIONS=--max-old-space-size=N` raises it. The growth before a full collection is then
 * fixed at 1.2× (`--heap-growing-percent`, for every thread's heap; only on the command line,
 * which NODE_OPTIONS does not allow): 15–25 MB less peak RSS with scoring in its worker
 * (docs/performance.md, "Heap growth").
 */
const SERVE_HEAP_FLAGS = [
  '--max-semi-space-size=16',
  '--max-old-space-size=1024',
  '--heap-growing-percent=20',
];

/**
 * glibc's malloc maps a block of 128 KB or more on its own (given back when freed) but raises
 * that threshold to the size of each such block freed, up to 32 MB; blocks under it then come
 * from its per-thread heaps, which keep what is freed. Fixed at 128 KB: 20–37 MB less peak RSS
 * with scoring in its worker at 1,000 traces/s, at the same CPU (docs/performance.md, "Large
 * blocks given back"). Other C libraries ignore the variable; a value in the environment is kept.
 */
const SERVE_MALLOC_ENV = { MALLOC_MMAP_THRESHOLD_: '131072' };

// The limits are fixed when V8 starts (and malloc's when the process does), so `serve` starts
// again in the same process (execve: same pid, nothing left of this one) with those not already
// given. `process.execve` came with Node 22.15, the oldest the package supports (engines).
if (process.argv[2] === 'serve' && process.platform !== 'win32' && process.execve !== undefined) {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  const missing = SERVE_HEAP_FLAGS.filter((flag) => {
    const name = flag.slice(0, flag.indexOf('='));
    return !given.some((arg) => arg.replaceAll('_', '-').startsWith(name));
  });
  const env = Object.entries(SERVE_MALLOC_ENV).filter(([name]) => process.env[name] === undefined);
  if (missing.length > 0 || env.length > 0) {
    process.execve(
      process.execPath,
      [process.execPath, ...process.execArgv, ...missing, ...process.argv.slice(1)],
      { ...process.env, ...Object.fromEntries(env) },
    );
  }
}

// Every start compiles several hundred modules; V8's code cache (kept under the OS temp dir,
// NODE_COMPILE_CACHE elsewhere, NODE_DISABLE_COMPILE_CACHE=1 off) makes the next start faster.
enableCompileCache();
const { runCli } = await import('./cli/index.js');

const code = await runCli(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  onShutdownSignal: (handler) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const)
      process.once(signal, () => void handler(signal));
  },
});
process.exit(code);
