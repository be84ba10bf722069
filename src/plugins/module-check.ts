import { WASI_FUNCTIONS } from './wasi.js';

/**
 * Module acceptance of wasi-json v1, checked on the bytes before anything is compiled or run: a
 * core module (not a component), within the size cap, importing only preview1 functions, with one
 * defined memory whose maximum is rewritten to the cap (V8 has no other way to bound a module's
 * linear memory: a worker's heap limits do not cover it), exporting `_start` and `memory`, and
 * without a start section (it would run while the module is being instantiated, outside the
 * deadline that guards `_start`).
 */

export const PAGE_BYTES = 65536;

const SECTION = { type: 1, import: 2, function: 3, memory: 5, export: 7, start: 8 } as const;
const IMPORT_KIND = ['function', 'table', 'memory', 'global', 'tag'] as const;
const EXPORT_KIND = ['function', 'table', 'memory', 'global', 'tag'] as const;
const ALLOWED = new Set<string>(WASI_FUNCTIONS);

export class ModuleRule extends Error {}

class Reader {
  pos: number;
  constructor(
    readonly bytes: Uint8Array,
    start = 0,
    readonly end = bytes.length,
  ) {
    this.pos = start;
  }
  byte(): number {
    if (this.pos >= this.end) throw new ModuleRule('the module is truncated');
    return this.bytes[this.pos++] as number;
  }
  /** Unsigned LEB128, up to 64 bits (memory64 limits), as a JS number (exact below 2^53). */
  uleb(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.byte();
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    throw new ModuleRule('the module has a malformed integer');
  }
  name(): string {
    const len = this.uleb();
    if (this.pos + len > this.end) throw new ModuleRule('the module is truncated');
    const s = new TextDecoder().decode(this.bytes.subarray(this.pos, this.pos + len));
    this.pos += len;
    return s;
  }
}

interface Section {
  id: number;
  /** Offset of the id byte. */
  start: number;
  bodyStart: number;
  end: number;
}

function sections(bytes: Uint8Array): Section[] {
  const r = new Reader(bytes, 8);
  const out: Section[] = [];
  while (r.pos < bytes.length) {
    const start = r.pos;
    const id = r.byte();
    const size = r.uleb();
    const bodyStart = r.pos;
    if (bodyStart + size > bytes.length) throw new ModuleRule('the module is truncated');
    out.push({ id, start, bodyStart, end: bodyStart + size });
    r.pos = bodyStart + size;
  }
  return out;
}

interface Limits {
  flags: number;
  min: number;
  max: number | undefined;
}

function limits(r: Reader): Limits {
  const flags = r.byte();
  if (flags > 7) throw new ModuleRule('the module has malformed limits');
  const min = r.uleb();
  const max = (flags & 1) === 1 ? r.uleb() : undefined;
  return { flags, min, max };
}

/** Checks the imports; returns the type index of each imported function, in order. */
function checkImports(bytes: Uint8Array, s: Section | undefined): number[] {
  const types: number[] = [];
  if (s === undefined) return types;
  const r = new Reader(bytes, s.bodyStart, s.end);
  const count = r.uleb();
  for (let i = 0; i < count; i++) {
    const module = r.name();
    const field = r.name();
    const kind = IMPORT_KIND[r.byte()];
    const what = `import ${JSON.stringify(module)}.${JSON.stringify(field)}`;
    if (kind !== 'function') {
      throw new ModuleRule(
        `${what} is a ${kind ?? 'unknown kind'}; only functions may be imported`,
      );
    }
    types.push(r.uleb());
    if (module !== 'wasi_snapshot_preview1' || !ALLOWED.has(field)) {
      throw new ModuleRule(`${what} is not allowed; only wasi_snapshot_preview1 functions are`);
    }
  }
  return types;
}

/** Checks the exports; returns the function index of `_start`. */
function checkExports(bytes: Uint8Array, s: Section | undefined): number {
  const found = new Map<string, { kind: string; index: number }>();
  if (s !== undefined) {
    const r = new Reader(bytes, s.bodyStart, s.end);
    const count = r.uleb();
    for (let i = 0; i < count; i++) {
      const name = r.name();
      const kind = EXPORT_KIND[r.byte()] ?? 'unknown';
      found.set(name, { kind, index: r.uleb() });
    }
  }
  const start = found.get('_start');
  if (start?.kind !== 'function') {
    throw new ModuleRule('the module does not export a function "_start" (a WASI command)');
  }
  if (found.get('memory')?.kind !== 'memory') {
    throw new ModuleRule('the module does not export its memory as "memory"');
  }
  if (found.has('_initialize')) {
    throw new ModuleRule('the module exports "_initialize" (a reactor); a command is expected');
  }
  return start.index;
}

/** Whether function `index` has the type `[] -> []`, as `_start` must. */
function takesNothing(
  bytes: Uint8Array,
  all: Section[],
  imported: number[],
  index: number,
): boolean {
  let typeIndex = imported[index];
  if (typeIndex === undefined) {
    const functions = all.find((s) => s.id === SECTION.function);
    if (functions === undefined) return false;
    const r = new Reader(bytes, functions.bodyStart, functions.end);
    const count = r.uleb();
    const local = index - imported.length;
    if (local >= count) return false;
    for (let i = 0; i < local; i++) r.uleb();
    typeIndex = r.uleb();
  }
  const types = all.find((s) => s.id === SECTION.type);
  if (types === undefined) return false;
  const r = new Reader(bytes, types.bodyStart, types.end);
  const count = r.uleb();
  if (typeIndex >= count) return false;
  for (let i = 0; i <= typeIndex; i++) {
    // Only plain function types (0x60) with one-byte value types are read; anything newer is
    // refused rather than guessed at.
    if (r.byte() !== 0x60)
      throw new ModuleRule('the module uses type forms this host does not read');
    const params = r.uleb();
    for (let p = 0; p < params; p++) r.byte();
    const results = r.uleb();
    for (let p = 0; p < results; p++) r.byte();
    if (i === typeIndex) return params === 0 && results === 0;
  }
  return false;
}

/** Checks the one memory and returns a memory section whose maximum is `min(declared, cap)`. */
function cappedMemory(bytes: Uint8Array, s: Section, capPages: number): Uint8Array {
  const r = new Reader(bytes, s.bodyStart, s.end);
  if (r.uleb() !== 1) throw new ModuleRule('the module must define exactly one memory');
  const { flags, min, max } = limits(r);
  if ((flags & 2) !== 0) throw new ModuleRule('the module memory is shared; it must not be');
  if ((flags & 4) !== 0) throw new ModuleRule('the module memory is 64-bit; it must be 32-bit');
  if (min > capPages) {
    throw new ModuleRule(
      `the module memory starts at ${min} pages, over the cap of ${capPages} pages (${(capPages * PAGE_BYTES) / 2 ** 20} MiB)`,
    );
  }
  const body = [1, 1, ...uleb(min), ...uleb(Math.min(max ?? capPages, capPages))];
  return new Uint8Array([SECTION.memory, ...uleb(body.length), ...body]);
}

function uleb(n: number): number[] {
  const out: number[] = [];
  let v = n;
  do {
    let b = v & 0x7f;
    v = Math.floor(v / 128);
    if (v !== 0) b |= 0x80;
    out.push(b);
  } while (v !== 0);
  return out;
}

/**
 * Applies the acceptance rules to `bytes` and returns the module with its memory maximum capped.
 * Throws a ModuleRule whose message names the broken rule.
 */
export function acceptModule(
  bytes: Uint8Array,
  caps: { maxBytes: number; memoryPages: number },
): Uint8Array {
  if (bytes.length > caps.maxBytes) {
    throw new ModuleRule(`the module is ${bytes.length} bytes, over the cap of ${caps.maxBytes}`);
  }
  const magic = [0x00, 0x61, 0x73, 0x6d];
  if (bytes.length < 8 || magic.some((b, i) => bytes[i] !== b)) {
    throw new ModuleRule('the file is not a WebAssembly module');
  }
  if (bytes[4] !== 1 || bytes[5] !== 0 || bytes[6] !== 0 || bytes[7] !== 0) {
    throw new ModuleRule(
      'the file is not a core WebAssembly module (version 1); components are not supported',
    );
  }
  const all = sections(bytes);
  const find = (id: number) => all.filter((s) => s.id === id);
  const imported = checkImports(bytes, find(SECTION.import)[0]);
  if (find(SECTION.start).length > 0) {
    throw new ModuleRule('the module has a start section; put start-up code in "_start"');
  }
  const start = checkExports(bytes, find(SECTION.export)[0]);
  if (!takesNothing(bytes, all, imported, start)) {
    throw new ModuleRule('the module\'s "_start" must take no parameters and return nothing');
  }
  const memory = find(SECTION.memory);
  if (memory.length > 1) throw new ModuleRule('the module has more than one memory section');
  const section = memory[0];
  if (section === undefined) throw new ModuleRule('the module defines no memory');
  const patched = cappedMemory(bytes, section, caps.memoryPages);
  const out = new Uint8Array(bytes.length - (section.end - section.start) + patched.length);
  out.set(bytes.subarray(0, section.start), 0);
  out.set(patched, section.start);
  out.set(bytes.subarray(section.end), section.start + patched.length);
  return out;
}
