import { afterAll, describe, expect, it } from 'vitest';
import { sha256Hex } from './loader.js';
import { acceptModule } from './module-check.js';
import { type RunEnding, WorkerPool } from './pool.js';
import { WALL_CLOCK_START_NS } from './wasi.js';
import { command } from './wat.testkit.js';

/** The WASI layer and the worker pool, driven by WAT probes that write what they observe. */

const pool = new WorkerPool(2);
afterAll(() => pool.stop());

const KEY_A = new Uint8Array(32).fill(1);
const KEY_B = new Uint8Array(32).fill(2);

async function run(
  bytes: Uint8Array,
  opts: {
    stdin?: string;
    key?: Uint8Array;
    timeoutMs?: number;
    maxStdout?: number;
    args?: string[];
  } = {},
): Promise<RunEnding> {
  const patched = acceptModule(bytes, { maxBytes: 32 * 2 ** 20, memoryPages: 1024 });
  const sha = sha256Hex(patched);
  if (!pool.has(sha)) pool.load(sha, await WebAssembly.compile(patched));
  return pool.run(
    sha,
    {
      args: opts.args ?? ['probe'],
      stdin: new TextEncoder().encode(opts.stdin ?? ''),
      randomKey: opts.key ?? KEY_A,
      maxStdout: opts.maxStdout ?? 2 ** 20,
    },
    opts.timeoutMs ?? 10_000,
  );
}

function stdout(ending: RunEnding): Buffer {
  if (ending.kind !== 'exit') throw new Error(`expected an exit, got ${JSON.stringify(ending)}`);
  return Buffer.from(ending.stdout);
}

const echo = command(`
  (i32.store (i32.const 16) (i32.const 4096))
  (i32.store (i32.const 20) (i32.const 60000))
  (drop (call $fd_read (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 24)))
  (call $out (i32.const 4096) (i32.load (i32.const 24)))`);

describe('the WASI layer', () => {
  it('gives the request on stdin and captures stdout', async () => {
    const ending = await run(echo, { stdin: '{"record":{"id":"r1"}}' });
    expect(stdout(ending).toString()).toBe('{"record":{"id":"r1"}}');
    expect(ending.kind === 'exit' && ending.stdinRead).toBe(22);
  });

  it('runs a module that never reads stdin', async () => {
    const ending = await run(command('(call $out (i32.const 0) (i32.const 0))'), {
      stdin: 'x'.repeat(5000),
    });
    expect(ending).toMatchObject({ kind: 'exit', code: 0, stdinRead: 0 });
  });

  it('starts the clocks at fixed values and advances them 1 ms per read', async () => {
    const probe = command(`
      (drop (call $clock_time_get (i32.const 0) (i64.const 0) (i32.const 100)))
      (drop (call $clock_time_get (i32.const 1) (i64.const 0) (i32.const 108)))
      (drop (call $clock_time_get (i32.const 0) (i64.const 0) (i32.const 116)))
      (call $out (i32.const 100) (i32.const 24))`);
    for (const key of [KEY_A, KEY_B]) {
      const out = stdout(await run(probe, { key }));
      expect(out.readBigUInt64LE(0)).toBe(WALL_CLOCK_START_NS);
      expect(out.readBigUInt64LE(8)).toBe(1_000_000n);
      expect(out.readBigUInt64LE(16)).toBe(WALL_CLOCK_START_NS + 2_000_000n);
    }
  });

  it('answers a sleep at once by moving the clock', async () => {
    // One clock subscription (relative, monotonic, 10 s), then a read of the monotonic clock.
    const probe = command(`
      (i64.store (i32.const 100) (i64.const 7))
      (i32.store8 (i32.const 108) (i32.const 0))
      (i32.store (i32.const 116) (i32.const 1))
      (i64.store (i32.const 124) (i64.const 10000000000))
      (drop (call $poll_oneoff (i32.const 100) (i32.const 200) (i32.const 1) (i32.const 300)))
      (drop (call $clock_time_get (i32.const 1) (i64.const 0) (i32.const 304)))
      (call $out (i32.const 200) (i32.const 8))
      (call $out (i32.const 300) (i32.const 12))`);
    const started = performance.now();
    const out = stdout(await run(probe));
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(out.readBigUInt64LE(0)).toBe(7n);
    expect(out.readUInt32LE(8)).toBe(1);
    expect(out.readBigUInt64LE(12)).toBe(10_000_000_000n);
  });

  it('gives the same random bytes for the same key and different ones for another', async () => {
    const probe = command(`
      (drop (call $random_get (i32.const 100) (i32.const 32)))
      (call $out (i32.const 100) (i32.const 32))`);
    const a1 = stdout(await run(probe, { key: KEY_A }));
    const a2 = stdout(await run(probe, { key: KEY_A }));
    const b = stdout(await run(probe, { key: KEY_B }));
    expect(a1.equals(a2)).toBe(true);
    expect(a1.equals(b)).toBe(false);
    expect(a1.equals(Buffer.alloc(32))).toBe(false);
  });

  it('has one argument (the evaluator name) and no environment', async () => {
    const probe = command(`
      (drop (call $args_sizes_get (i32.const 100) (i32.const 104)))
      (drop (call $environ_sizes_get (i32.const 108) (i32.const 112)))
      (drop (call $args_get (i32.const 120) (i32.const 200)))
      (call $out (i32.const 100) (i32.const 16))
      (call $out (i32.const 200) (i32.load (i32.const 104)))`);
    const out = stdout(await run(probe, { args: ['acme.rubric'] }));
    expect([
      out.readUInt32LE(0),
      out.readUInt32LE(4),
      out.readUInt32LE(8),
      out.readUInt32LE(12),
    ]).toEqual([1, 12, 0, 0]);
    expect(out.subarray(16).toString()).toBe('acme.rubric\0');
  });

  it('has no files, directories or sockets', async () => {
    const probe = command(`
      (i32.store (i32.const 300) (call $fd_prestat_get (i32.const 3) (i32.const 100)))
      (i32.store (i32.const 304) (call $path_open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 0)
        (i32.const 0) (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 100)))
      (i32.store (i32.const 308) (call $sock_accept (i32.const 3) (i32.const 0) (i32.const 100)))
      (i32.store (i32.const 312) (call $fd_write (i32.const 5) (i32.const 0) (i32.const 0) (i32.const 100)))
      (call $out (i32.const 300) (i32.const 16))`);
    const out = stdout(await run(probe));
    // EBADF (no preopened directory), ENOTCAPABLE, ENOSYS, EBADF.
    expect([0, 4, 8, 12].map((o) => out.readUInt32LE(o))).toEqual([8, 76, 52, 8]);
  });

  it('gives every record a fresh instance: nothing left in memory reaches the next', async () => {
    const probe = command(`
      (call $out (i32.const 500) (i32.const 4))
      (i32.store (i32.const 500) (i32.const 42))`);
    for (let i = 0; i < 4; i++) expect(stdout(await run(probe)).readUInt32LE(0)).toBe(0);
  });

  it('maps proc_exit to its code and a trap to its message', async () => {
    expect(await run(command('(call $proc_exit (i32.const 3))'))).toMatchObject({
      kind: 'exit',
      code: 3,
    });
    const trap = await run(command('(unreachable)'));
    expect(trap).toMatchObject({ kind: 'trap' });
    expect(trap.kind === 'trap' && trap.message).toContain('unreachable');
  });

  it('stops a 100 MB writer at the output cap', async () => {
    // 1600 writes of 64 KiB each.
    const bomb = command(`
      (local $i i32)
      (loop $w
        (call $out (i32.const 0) (i32.const 65536))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $w (i32.lt_u (local.get $i) (i32.const 1600))))`);
    expect(await run(bomb)).toEqual({ kind: 'overflow' });
  });

  it('lets memory grow only to the cap', async () => {
    const bomb = command(`
      (block $done (loop $grow
        (br_if $done (i32.eq (memory.grow (i32.const 16)) (i32.const -1)))
        (br $grow)))
      (i32.store (i32.const 100) (memory.size))
      (call $out (i32.const 100) (i32.const 4))`);
    const pages = stdout(await run(bomb)).readUInt32LE(0);
    expect(pages).toBeLessThanOrEqual(1024);
    expect(pages).toBeGreaterThan(1024 - 16);
  });
});

describe('the worker pool', () => {
  it('stops an endless module at the deadline, replaces its worker and keeps serving', async () => {
    const spin = command('(loop $l (br $l))');
    const replaced = pool.replaced;
    const started = performance.now();
    expect(await run(spin, { timeoutMs: 300 })).toEqual({ kind: 'deadline' });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(pool.replaced).toBe(replaced + 1);
    const after = await Promise.all([
      run(echo, { stdin: 'a' }),
      run(echo, { stdin: 'b' }),
      run(echo, { stdin: 'c' }),
    ]);
    expect(after.map((e) => stdout(e).toString())).toEqual(['a', 'b', 'c']);
  });

  it('runs records in parallel, a trapping module beside a healthy one', async () => {
    const trap = command('(unreachable)');
    const endings = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        i % 2 === 0 ? run(trap) : run(echo, { stdin: String(i) }),
      ),
    );
    endings.forEach((e, i) => {
      if (i % 2 === 0) expect(e.kind).toBe('trap');
      else expect(stdout(e).toString()).toBe(String(i));
    });
  });
});
