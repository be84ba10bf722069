/**
 * Builds the example plug-ins with the toolchains found on this machine and pins the results:
 * each manifest gets its module's sha256 and size, the index gets each manifest's sha256, and
 * index.sha256 the index's. Run from the repository root:
 *
 *   npx tsx examples/plugins/build.ts            # build what can be built here, then pin
 *   npx tsx examples/plugins/build.ts --pin-only # only re-pin the committed modules
 *
 * The test src/plugins/examples.test.ts rebuilds each example in a scratch copy with the same
 * commands and compares the bytes with the committed module.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

export const EXAMPLES_DIR = dirname(fileURLToPath(import.meta.url));
const ROOT = join(EXAMPLES_DIR, '..', '..');
export const MODULE_FILE = 'exact-match.wasm';

export interface Toolchain {
  /** The example's directory under examples/plugins. */
  dir: string;
  /** The toolchain's version, or undefined when it is not installed here. */
  version(): string | undefined;
  /** Builds `dir`'s sources (copied to `workDir`) into `workDir/exact-match.wasm`. */
  build(workDir: string): void;
}

function probe(cmd: string, args: string[]): string | undefined {
  try {
    return execFileSync(cmd, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return undefined;
  }
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): void {
  execFileSync(cmd, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
}

export const TOOLCHAINS: Toolchain[] = [
  {
    dir: 'assemblyscript',
    version: () =>
      JSON.parse(readFileSync(join(ROOT, 'node_modules/assemblyscript/package.json'), 'utf8'))
        .version,
    build: (work) =>
      run(
        process.execPath,
        [
          join(ROOT, 'node_modules/assemblyscript/bin/asc.js'),
          'assembly/index.ts',
          '--config',
          'asconfig.json',
          '--target',
          'release',
        ],
        work,
      ),
  },
  {
    dir: 'go',
    version: () => probe('go', ['env', 'GOVERSION']),
    build: (work) =>
      run('go', ['build', '-trimpath', '-o', MODULE_FILE, '.'], work, {
        GOOS: 'wasip1',
        GOARCH: 'wasm',
      }),
  },
  {
    dir: 'c',
    // Debian's clang 14 with wasi-libc (apt-get install clang lld wasi-libc).
    version: () =>
      existsSync('/usr/lib/wasm32-wasi/libc.a') ? probe('clang', ['-dumpversion']) : undefined,
    // clang runs any `wasm-opt` on PATH after linking (binaryen's, under node_modules/.bin, when
    // started from npm), which changes the bytes: the build runs without it.
    build: (work) =>
      run(
        'clang',
        [
          '--target=wasm32-wasi',
          '--sysroot=/usr',
          '-O2',
          '-Wl,--strip-all',
          '-o',
          MODULE_FILE,
          'exact_match.c',
        ],
        work,
        {
          PATH: (process.env.PATH ?? '')
            .split(':')
            .filter((p) => !p.includes('node_modules'))
            .join(':'),
        },
      ),
  },
  {
    dir: 'rust',
    version: () => {
      const targets = probe('rustup', ['target', 'list', '--installed']);
      return targets?.split('\n').includes('wasm32-wasip1')
        ? probe('rustc', ['--version'])
        : undefined;
    },
    build: (work) => {
      run('cargo', ['build', '--release', '--offline', '--target', 'wasm32-wasip1'], work);
      const built = join(work, 'target/wasm32-wasip1/release', MODULE_FILE);
      writeFileSync(join(work, MODULE_FILE), readFileSync(built));
    },
  },
];

/** Files an example's build reads (its sources), copied into a scratch directory to rebuild. */
const SOURCES: Record<string, string[]> = {
  assemblyscript: ['asconfig.json', 'assembly'],
  go: ['go.mod', 'main.go'],
  c: ['exact_match.c'],
  rust: ['Cargo.toml', 'Cargo.lock', 'src'],
};

/** Builds `t`'s example from a scratch copy of its sources and returns the module's bytes. */
export function rebuild(t: Toolchain): Buffer {
  const scratch = mkdtempSync(join(tmpdir(), `touchstone-plugin-${t.dir}-`));
  // The same layout as the checkout, so relative paths (asconfig's `extends`) still resolve.
  const work = join(scratch, 'examples', 'plugins', t.dir);
  try {
    symlinkSync(join(ROOT, 'node_modules'), join(scratch, 'node_modules'));
    for (const f of SOURCES[t.dir] ?? []) {
      cpSync(join(EXAMPLES_DIR, t.dir, f), join(work, f), { recursive: true });
    }
    t.build(work);
    return readFileSync(join(work, MODULE_FILE));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Writes the module's pin into each manifest, each manifest's into the index, the index's into index.sha256. */
export function pin(): void {
  const indexFile = join(EXAMPLES_DIR, 'index.yaml');
  const index = parse(readFileSync(indexFile, 'utf8'));
  for (const entry of index.entries) {
    const manifestFile = join(EXAMPLES_DIR, entry.manifest.file);
    const manifest = parse(readFileSync(manifestFile, 'utf8'));
    const module = readFileSync(join(dirname(manifestFile), manifest.spec.module.file));
    manifest.spec.module.sha256 = sha256(module);
    manifest.spec.module.size = module.length;
    const text = stringify(manifest, { lineWidth: 0 });
    writeFileSync(manifestFile, text);
    entry.manifest.sha256 = sha256(Buffer.from(text));
  }
  const text = stringify(index, { lineWidth: 0 });
  writeFileSync(indexFile, text);
  writeFileSync(join(EXAMPLES_DIR, 'index.sha256'), `${sha256(Buffer.from(text))}  index.yaml\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.argv.includes('--pin-only')) {
    for (const t of TOOLCHAINS) {
      const version = t.version();
      if (version === undefined) {
        process.stderr.write(
          `${t.dir}: toolchain not installed here; keeping the committed module\n`,
        );
        continue;
      }
      t.build(join(EXAMPLES_DIR, t.dir));
      process.stderr.write(`${t.dir}: built with ${version}\n`);
    }
  }
  pin();
}
