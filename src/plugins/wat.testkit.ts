import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import wabtInit from 'wabt';
import { sha256Hex } from './loader.js';

/**
 * Test modules written in WAT and assembled in the test with wabt (no committed binaries), and a
 * plug-in chain (index, manifests, modules) written to a directory with correct pins.
 */

const wabt = await wabtInit();

export function wat(text: string, features: Record<string, boolean> = {}): Uint8Array {
  const parsed = wabt.parseWat('fixture.wat', text, features);
  try {
    return new Uint8Array(parsed.toBinary({}).buffer);
  } finally {
    parsed.destroy();
  }
}

/** The WASI functions a fixture may import, with their preview1 signatures. */
const SIGNATURES: Record<string, string> = {
  fd_read: '(param i32 i32 i32 i32) (result i32)',
  fd_write: '(param i32 i32 i32 i32) (result i32)',
  proc_exit: '(param i32)',
  clock_time_get: '(param i32 i64 i32) (result i32)',
  random_get: '(param i32 i32) (result i32)',
  args_sizes_get: '(param i32 i32) (result i32)',
  args_get: '(param i32 i32) (result i32)',
  environ_sizes_get: '(param i32 i32) (result i32)',
  fd_prestat_get: '(param i32 i32) (result i32)',
  path_open: '(param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)',
  sock_accept: '(param i32 i32 i32) (result i32)',
  poll_oneoff: '(param i32 i32 i32 i32) (result i32)',
};

/**
 * A command module with every import above (as `$name`), one page of memory (`memory`), the
 * helper `$out (ptr len)` writing to stdout, and `body` as `_start`. `data` are extra top-level
 * fields (data segments, globals).
 */
export function command(
  body: string,
  data = '',
  memory = '(memory (export "memory") 1)',
): Uint8Array {
  const imports = Object.entries(SIGNATURES)
    .map(([n, sig]) => `(import "wasi_snapshot_preview1" "${n}" (func $${n} ${sig}))`)
    .join('\n');
  return wat(`(module
    ${imports}
    ${memory}
    ${data}
    (func $out (param $ptr i32) (param $len i32)
      (i32.store (i32.const 0) (local.get $ptr))
      (i32.store (i32.const 4) (local.get $len))
      (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
    (func (export "_start") ${body}))`);
}

/** A module writing `json` to stdout and returning. */
export function answering(json: string): Uint8Array {
  const escaped = [...new TextEncoder().encode(json)]
    .map((b) => `\\${b.toString(16).padStart(2, '0')}`)
    .join('');
  return command(
    `(call $out (i32.const 1024) (i32.const ${new TextEncoder().encode(json).length}))`,
    `(data (i32.const 1024) "${escaped}")`,
  );
}

export interface FixturePlugin {
  name: string;
  version?: string;
  module: Uint8Array;
  evaluators: Record<string, unknown>[];
  limits?: Record<string, number>;
}

/** Writes the chain under `dir` and returns the index path and its sha256. */
export function writeChain(
  dir: string,
  plugins: FixturePlugin[],
): { index: string; sha256: string } {
  mkdirSync(dir, { recursive: true });
  const entries = plugins.map((p) => {
    const version = p.version ?? '1.0.0';
    mkdirSync(join(dir, p.name), { recursive: true });
    writeFileSync(join(dir, p.name, 'module.wasm'), p.module);
    const manifest = JSON.stringify(
      {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'EvaluatorPlugin',
        metadata: { name: p.name, version },
        spec: {
          abi: 'wasi-json/v1',
          module: { file: 'module.wasm', sha256: sha256Hex(p.module) },
          evaluators: p.evaluators,
          ...(p.limits === undefined ? {} : { limits: p.limits }),
        },
      },
      null,
      2,
    );
    writeFileSync(join(dir, p.name, 'manifest.json'), manifest);
    return {
      name: p.name,
      version,
      manifest: { file: `${p.name}/manifest.json`, sha256: sha256Hex(Buffer.from(manifest)) },
    };
  });
  const index = JSON.stringify({
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'EvaluatorPluginIndex',
    entries,
  });
  writeFileSync(join(dir, 'index.json'), index);
  return { index: join(dir, 'index.json'), sha256: sha256Hex(Buffer.from(index)) };
}
