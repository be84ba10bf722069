import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/process.js';

/**
 * bin/touchstone.js and scripts/build-dist.mjs copied into a checkout of their own whose src/ is
 * one small file, so a build takes seconds: what the command does when dist/ is missing or stale,
 * and how it behaves under npx, are checked on real processes without rebuilding the project.
 */
function checkout(main: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-bin-'));
  for (const sub of ['bin', 'scripts', 'src', 'node_modules/.bin']) {
    mkdirSync(join(dir, sub), { recursive: true });
  }
  copyFileSync('bin/touchstone.js', join(dir, 'bin/touchstone.js'));
  copyFileSync('scripts/build-dist.mjs', join(dir, 'scripts/build-dist.mjs'));
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'touchstone',
      type: 'module',
      bin: { touchstone: 'bin/touchstone.js' },
    }),
  );
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'es2022', module: 'nodenext', strict: true, types: [] },
    }),
  );
  writeFileSync(
    join(dir, 'tsconfig.build.json'),
    JSON.stringify({
      extends: './tsconfig.json',
      compilerOptions: { rootDir: 'src', outDir: 'dist' },
      include: ['src'],
    }),
  );
  writeFileSync(join(dir, 'src/main.ts'), main);
  const typescript = dirname(
    realpathSync(createRequire(import.meta.url).resolve('typescript/package.json')),
  );
  symlinkSync(typescript, join(dir, 'node_modules/typescript'));
  // What npm links for a package's bin, so npx finds it here.
  symlinkSync('../../bin/touchstone.js', join(dir, 'node_modules/.bin/touchstone'));
  return dir;
}

const PROCESS_TYPE =
  'declare const process: { pid: number; argv: string[]; exitCode?: number; on(signal: string, f: () => void): void; stdout: { write(s: string): boolean } };\n';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function bin(dir: string) {
  const r = spawnSync(process.execPath, [join(dir, 'bin/touchstone.js'), 'a', 'b'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('bin/touchstone.js in a checkout', () => {
  it('builds dist/ when it is missing or older than src/, saying so on stderr, then runs it', () => {
    const dir = checkout(`${PROCESS_TYPE}process.stdout.write(process.argv.slice(2).join(' '));\n`);
    dirs.push(dir);

    const first = bin(dir);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe('a b');
    expect(first.stderr).toMatch(
      /^touchstone: dist\/ is missing: building dist\/ from src\/ \(about a minute\)…\ntouchstone: built dist\/ in \d+ s\n$/,
    );

    const second = bin(dir);
    expect(second).toEqual({ code: 0, stdout: 'a b', stderr: '' });

    writeFileSync(join(dir, 'src/main.ts'), `${PROCESS_TYPE}process.stdout.write('changed');\n`);
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(dir, 'src/main.ts'), later, later);
    const third = bin(dir);
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toBe('changed');
    expect(third.stderr).toContain('touchstone: src/ changed since dist/ was built: building');

    writeFileSync(join(dir, 'src/extra.ts'), 'export const broken: number = "text";\n');
    const failed = bin(dir);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toBe('');
    expect(failed.stderr).toContain('touchstone: the build failed (errors above)');
    expect(failed.stderr).toContain('src/extra.ts');
  }, 240_000);

  it('stops when `npx touchstone` is sent SIGTERM (npx runs it under a shell that does not pass it on)', async () => {
    const dir = checkout(
      `${PROCESS_TYPE}declare function setInterval(f: () => void, ms: number): unknown;\n` +
        'declare function clearInterval(t: unknown): void;\n' +
        "if (process.argv[2] === 'serve') {\n" +
        '  const alive = setInterval(() => {}, 1000);\n' +
        "  process.on('SIGTERM', () => { process.stdout.write('stopping\\n'); clearInterval(alive); });\n" +
        "  process.stdout.write('listening ' + process.pid + '\\n');\n" +
        '}\n',
    );
    dirs.push(dir);
    expect(bin(dir).code).toBe(0); // built once, outside the timed part
    const npx: ChildProcess = spawn('npx', ['touchstone', 'serve'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      // npx links the checkout into its cache: a cache of the test's own.
      env: { ...process.env, npm_config_cache: join(dir, '.npm-cache') },
    });
    let out = '';
    npx.stdout?.on('data', (d) => {
      out += d;
    });
    npx.stderr?.on('data', (d) => {
      out += d;
    });
    const pid = await eventually(async () => {
      const m = /listening (\d+)/.exec(out);
      return m === null ? undefined : Number(m[1]);
    }, 60_000);
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      expect(pid).not.toBe(npx.pid);
      npx.kill('SIGTERM');
      await eventually(async () => (alive() ? undefined : true), 20_000);
      expect(out).toContain('stopping');
    } finally {
      if (alive()) process.kill(pid, 'SIGKILL');
    }
  }, 120_000);
});
