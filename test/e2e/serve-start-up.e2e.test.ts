import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/process.js';

/**
 * What `serve` loads at start, thread by thread. What only a feature in use needs (the outbound
 * HTTP client, the tool protocol, Parquet, AWS signing, the PostgreSQL driver, Envoy's external
 * processor) is loaded at its first use, and the completion thread loads only what completes
 * traces: an idle server held ~40 MB more before (docs/performance.md, "Memory"). A module hook
 * in the real process lists every module each thread resolves.
 */
const dir = mkdtempSync(join(tmpdir(), 'touchstone-serve-start-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The compiled server (bin/ builds dist/ first when it is older than src/): from sources, each
 * worker thread registers tsx's loader itself, and the hooks of the process do not see it.
 */
const BIN = fileURLToPath(new URL('../../bin/touchstone.js', import.meta.url));

const ON_DEMAND =
  /\/node_modules\/(undici|@modelcontextprotocol\/sdk|hyparquet|hyparquet-compressors|@smithy\/[^/]+|pg)\/|\/(src|dist)\/guardrails\/ext-proc\//;

/**
 * The modules a `serve` with this config resolved up to its stop, as edges from the importing
 * module ('' for a thread's entry). Module hooks run off-thread and see every thread's imports.
 */
async function importsOf(name: string, config: string): Promise<Map<string, Set<string>>> {
  const out = join(dir, `${name}.tsv`);
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(spec, ctx, next) {
  const r = await next(spec, ctx);
  appendFileSync(process.env.MODULES_OUT, (ctx.parentURL ?? '') + '\\t' + r.url + '\\n');
  return r;
}
`,
  );
  const register = join(dir, 'register.mjs');
  writeFileSync(
    register,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
  );
  const port = await freePort();
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, `listen: 127.0.0.1:${port}\ndata_dir: ${join(dir, name)}\n${config}`);
  const proc = spawn(
    process.execPath,
    ['--import', pathToFileURL(register).href, BIN, 'serve', '--config', file],
    { env: { ...process.env, MODULES_OUT: out }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let said = '';
  const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    // bin/ builds dist/ first when it is stale (not under `npm test`, which builds it before).
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${said}`)), 150_000);
    const read = (d: Buffer) => {
      said += d;
      if (said.includes('listening on')) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout.on('data', read);
    proc.stderr.on('data', read);
  });
  // The background threads start beside the listener; give them time to load and open the store.
  await new Promise((r) => setTimeout(r, 2_000));
  proc.kill('SIGTERM');
  expect(await exited).toBe(0);
  const edges = new Map<string, Set<string>>();
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    const [from, to] = line.split('\t');
    if (from === undefined || to === undefined) continue;
    const set = edges.get(from) ?? new Set();
    set.add(to);
    edges.set(from, set);
  }
  return edges;
}

/** Every module reachable from the thread entry matching `entry` (none if no entry matches). */
function reachable(edges: Map<string, Set<string>>, entry: RegExp): string[] {
  const start = [...(edges.get('') ?? [])].filter((url) => entry.test(url));
  const seen = new Set(start);
  for (const url of seen) for (const next of edges.get(url) ?? []) seen.add(next);
  return [...seen];
}

const all = (edges: Map<string, Set<string>>) => [
  ...new Set([...edges.values()].flatMap((s) => [...s])),
];

describe('serve at start', () => {
  it('with online.worker false: loads nothing on demand, and the completion thread only what completes traces', async () => {
    const edges = await importsOf('in-process', 'online:\n  worker: false\n');
    expect(all(edges).length).toBeGreaterThan(500);
    expect(all(edges).filter((u) => ON_DEMAND.test(u))).toEqual([]);
    const completer = reachable(edges, /\/ingest\/completer-worker\.(ts|js)$/);
    expect(completer.length).toBeGreaterThan(100);
    expect(
      completer.filter((u) =>
        /\/(src|dist)\/(auth|cel|api|policies|evaluators|sources)\/|\/node_modules\/(jose|@bufbuild)\//.test(
          u,
        ),
      ),
    ).toEqual([]);
  }, 180_000);

  it('the default (a scoring worker): the scoring thread loads nothing on demand either', async () => {
    const edges = await importsOf('default', '');
    expect(reachable(edges, /\/app\/scoring-worker\.(ts|js)$/).length).toBeGreaterThan(100);
    expect(all(edges).filter((u) => ON_DEMAND.test(u))).toEqual([]);
  }, 180_000);
});
