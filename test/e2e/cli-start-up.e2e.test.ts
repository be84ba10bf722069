import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ENTRY } from '../support/process.js';

/**
 * A command talking to a server must not load what only local mode needs (the composition root,
 * the store, its drivers): that was ~1,700 modules and 2 s of CPU at every start. A module hook
 * in the real process lists every module it resolves.
 */
const dir = mkdtempSync(join(tmpdir(), 'touchstone-cli-start-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function modulesLoadedBy(args: string[]): string[] {
  const out = join(dir, `modules-${args[0]}.json`);
  const hook = join(dir, 'hook.mjs');
  writeFileSync(
    hook,
    `import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';
const seen = [];
registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); seen.push(r.url); return r; } });
process.on('exit', () => writeFileSync(${JSON.stringify(out)}, JSON.stringify(seen)));
`,
  );
  const r = spawnSync(process.execPath, ['--import', pathToFileURL(hook).href, ...ENTRY, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  // The server named does not answer: the command fails after starting, which is what is timed.
  expect(r.stderr).toContain('cannot reach the server');
  return JSON.parse(readFileSync(out, 'utf8')) as string[];
}

describe('a command with --server', () => {
  it.each([
    ['traces', 'list'],
    ['scores', 'list'],
    ['policy', 'list'],
    ['runs', 'list'],
    ['evaluators', 'list'],
  ])('%s %s loads neither the app nor the store', (...command) => {
    const loaded = modulesLoadedBy([...command, '--server', 'http://127.0.0.1:9']);
    expect(loaded.length).toBeGreaterThan(50);
    const local = loaded.filter((url) =>
      /\/(src|dist)\/(app|store|ingest|policies|sources|mcp)\/|\/node_modules\/(better-sqlite3|kysely|pg|fastify)\//.test(
        url,
      ),
    );
    expect(local).toEqual([]);
  });
});
