import { describe, expect, it } from 'vitest';
import { acceptModule } from './module-check.js';
import { answering, command, wat } from './wat.testkit.js';

const CAPS = { maxBytes: 1024 * 1024, memoryPages: 1024 };
const accept = (bytes: Uint8Array, caps = CAPS) => acceptModule(bytes, caps);
const start = '(func (export "_start"))';

describe('module acceptance', () => {
  it('accepts a command module importing only preview1 functions', () => {
    expect(() => accept(answering('{"scores":[]}'))).not.toThrow();
  });

  it('refuses an import outside wasi_snapshot_preview1, naming it', () => {
    const bytes = wat(`(module (import "env" "fetch" (func (param i32) (result i32)))
      (memory (export "memory") 1) ${start})`);
    expect(() => accept(bytes)).toThrow('import "env"."fetch" is not allowed');
  });

  it('refuses a preview1 name that does not exist (a preview2 or made-up call)', () => {
    const bytes =
      wat(`(module (import "wasi_snapshot_preview1" "sock_connect" (func (param i32) (result i32)))
      (memory (export "memory") 1) ${start})`);
    expect(() => accept(bytes)).toThrow('"sock_connect" is not allowed');
  });

  it('refuses an imported memory, table or global', () => {
    const memory = wat(`(module (import "wasi_snapshot_preview1" "memory" (memory 1))
      (export "memory" (memory 0)) ${start})`);
    expect(() => accept(memory)).toThrow('is a memory; only functions may be imported');
    const global = wat(
      `(module (import "env" "g" (global i32)) (memory (export "memory") 1) ${start})`,
    );
    expect(() => accept(global)).toThrow('is a global');
  });

  it('refuses a shared memory', () => {
    const bytes = wat(`(module (memory (export "memory") 1 2 shared) ${start})`, { threads: true });
    expect(() => accept(bytes)).toThrow('memory is shared');
  });

  it('refuses a 64-bit memory', () => {
    const bytes = wat(`(module (memory (export "memory") i64 1) ${start})`, { memory64: true });
    expect(() => accept(bytes)).toThrow('64-bit');
  });

  it('refuses an initial memory over the cap', () => {
    const bytes = wat(`(module (memory (export "memory") 2000) ${start})`);
    expect(() => accept(bytes)).toThrow(
      'starts at 2000 pages, over the cap of 1024 pages (64 MiB)',
    );
  });

  it('refuses a module without a memory, or with an unexported one', () => {
    expect(() => accept(wat(`(module ${start})`))).toThrow('does not export its memory');
    expect(() => accept(wat(`(module (memory 1) ${start})`))).toThrow('does not export its memory');
  });

  it('refuses a reactor, a module without _start, and a start section', () => {
    const reactor = wat(
      `(module (memory (export "memory") 1) ${start} (func (export "_initialize")))`,
    );
    expect(() => accept(reactor)).toThrow('exports "_initialize"');
    expect(() => accept(wat('(module (memory (export "memory") 1))'))).toThrow('"_start"');
    const startSection = wat(`(module (memory (export "memory") 1) (func $s) (start $s) ${start})`);
    expect(() => accept(startSection)).toThrow('start section');
  });

  it('refuses a _start that takes parameters or returns a value', () => {
    const takes = wat('(module (memory (export "memory") 1) (func (export "_start") (param i32)))');
    expect(() => accept(takes)).toThrow('"_start" must take no parameters and return nothing');
    const returns = wat(
      '(module (memory (export "memory") 1) (func (export "_start") (result i32) (i32.const 0)))',
    );
    expect(() => accept(returns)).toThrow('"_start" must take no parameters');
  });

  it('refuses what is not a core module, and a module over the size cap', () => {
    expect(() => accept(new TextEncoder().encode('#!/bin/sh\necho hi\n'))).toThrow(
      'not a WebAssembly module',
    );
    const component = new Uint8Array([0, 0x61, 0x73, 0x6d, 0x0d, 0, 1, 0]);
    expect(() => accept(component)).toThrow('components are not supported');
    const bytes = answering('{"scores":[]}');
    expect(() => accept(bytes, { ...CAPS, maxBytes: 100 })).toThrow(
      `is ${bytes.length} bytes, over the cap of 100`,
    );
  });

  it('rewrites the memory maximum so growth stops at the cap', async () => {
    // Grows one page at a time until memory.grow fails, then returns the page count.
    const bytes = wat(`(module (memory (export "memory") 1)
      (func (export "_start"))
      (func (export "pages") (result i32)
        (block $done (loop $grow
          (br_if $done (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
          (br $grow)))
        (memory.size)))`);
    const patched = accept(bytes, { ...CAPS, memoryPages: 16 });
    const instance = new WebAssembly.Instance(await WebAssembly.compile(patched), {});
    expect((instance.exports.pages as () => number)()).toBe(16);
    // A declared maximum under the cap is kept.
    const small = wat(
      '(module (memory (export "memory") 1 3) (func (export "_start")) (func (export "pages") (result i32) (drop (memory.grow (i32.const 10))) (memory.size)))',
    );
    const kept = new WebAssembly.Instance(await WebAssembly.compile(accept(small)), {});
    expect((kept.exports.pages as () => number)()).toBe(1);
  });

  it('accepts every import the fixtures use', () => {
    expect(() => accept(command('(nop)'))).not.toThrow();
  });
});
