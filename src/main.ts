/**
 * Process entry: the only module that reads `process.env` or calls `process.exit`. The environment
 * is handed on whole: config reads `TOUCHSTONE_*` and the standard `HTTPS_PROXY` / `HTTP_PROXY` /
 * `NO_PROXY` (into `proxy.*`) from it, and credential references (`{env: VAR}`) resolve against it.
 */
import { enableCompileCache } from 'node:module';

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
