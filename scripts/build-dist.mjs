// Builds dist/ from src/ (and the web UI from ui/ into dist/ui) in a checkout and keeps a stamp of the sources it was built from, so the
// `touchstone` command can tell when dist/ is missing or older than src/ and rebuild it first.
// Used by `npm run build`, by `prepare` (after `npm install`) and by bin/touchstone.js.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const STAMP = join('dist', '.source-stamp');
const CONFIGS = ['tsconfig.json', 'tsconfig.build.json'];
const UI_CONFIG = join('ui', 'vite.config.ts');

/** Files tsconfig.build.json compiles (tests and testkits are excluded there too). */
function sources(dir, out = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) sources(path, out);
    else if (
      /\.(ts|tsx|css|html|json)$/.test(entry.name) &&
      !/\.(test|testkit)\.ts$/.test(entry.name)
    ) {
      out.push(path);
    }
  }
  return out;
}

/** The sources' count and newest change time: a file added, removed or edited changes it. */
function fingerprint(root) {
  const files = [...sources(join(root, 'src')), ...CONFIGS.map((c) => join(root, c))];
  if (existsSync(join(root, UI_CONFIG))) files.push(...sources(join(root, 'ui')));
  let newest = 0;
  for (const file of files) newest = Math.max(newest, statSync(file).mtimeMs);
  return `${files.length} ${newest}`;
}

/** Why dist/ must be built before it runs, or undefined when it is current. */
export function staleness(root) {
  if (!existsSync(join(root, 'dist', 'main.js'))) return 'dist/ is missing';
  let stamp;
  try {
    stamp = readFileSync(join(root, STAMP), 'utf8');
  } catch {
    return 'dist/ has no record of the sources it was built from';
  }
  return stamp === fingerprint(root) ? undefined : 'src/ changed since dist/ was built';
}

/** A development tool's entry script, or undefined when it is not installed. */
function tool(root, pkg, bin) {
  try {
    const manifest = createRequire(join(root, 'package.json')).resolve(`${pkg}/package.json`);
    return join(dirname(manifest), bin);
  } catch {
    return undefined;
  }
}

/** Runs a build step with its output on stderr (a command's stdout stays its own). */
function step(root, entry, args) {
  execFileSync(process.execPath, [entry, ...args], { cwd: root, stdio: ['ignore', 2, 2] });
}

/**
 * Compiles src/ (and ui/) into dist/, saying so on stderr (the compiler's own output goes there too, so a
 * command's stdout stays its own). Returns false when TypeScript is absent or the build failed.
 */
export function build(root, reason) {
  const why = reason === undefined ? '' : `${reason}: `;
  const tsc = tool(root, 'typescript', join('bin', 'tsc'));
  if (tsc === undefined) {
    process.stderr.write(
      `touchstone: ${why}cannot build dist/ without TypeScript (run \`npm install\`)\n`,
    );
    return false;
  }
  const before = fingerprint(root);
  // The web UI (dist/ui) needs Vite, a development dependency like TypeScript.
  const vite = existsSync(join(root, UI_CONFIG))
    ? tool(root, 'vite', join('bin', 'vite.js'))
    : undefined;
  const from = vite === undefined ? 'src/' : 'src/ and ui/';
  process.stderr.write(`touchstone: ${why}building dist/ from ${from} (about a minute)…\n`);
  const started = Date.now();
  try {
    step(root, tsc, ['-p', 'tsconfig.build.json']);
    if (vite !== undefined) {
      step(root, vite, ['build', '--logLevel', 'warn', '--config', UI_CONFIG]);
    }
  } catch {
    process.stderr.write('touchstone: the build failed (errors above)\n');
    return false;
  }
  writeFileSync(join(root, STAMP), before);
  process.stderr.write(
    `touchstone: built dist/ in ${Math.round((Date.now() - started) / 1000)} s\n`,
  );
  return true;
}

// `node scripts/build-dist.mjs` (npm run build): build whatever the stamp says.
if (fileURLToPath(import.meta.url) === resolve(process.argv[1] ?? '')) {
  process.exit(build(process.cwd()) ? 0 : 1);
}
