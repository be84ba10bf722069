import { createCipheriv } from 'node:crypto';

/**
 * The WASI preview1 host a plug-in sees: stdin is the request, stdout is captured under a cap,
 * stderr is accepted and discarded (it may repeat record content, which no log or result may
 * show), and nothing else exists — no preopened directories (so no file system), no
 * environment, no sockets. Time and randomness are deterministic so that a record replays: the
 * clocks start at fixed values and advance 1 ms per read (a frozen clock would hang the timers of
 * language runtimes such as Go's), sleeps advance the clock instead of waiting, and `random_get`
 * is an AES-256-CTR keystream keyed per record. `node:wasi` is not used: Node documents it as no
 * sandbox, and its stdio, sleeps and clocks reach the host.
 */

/** Every preview1 import name; a module may import any of them and nothing else. */
export const WASI_FUNCTIONS = [
  'args_get',
  'args_sizes_get',
  'environ_get',
  'environ_sizes_get',
  'clock_res_get',
  'clock_time_get',
  'fd_advise',
  'fd_allocate',
  'fd_close',
  'fd_datasync',
  'fd_fdstat_get',
  'fd_fdstat_set_flags',
  'fd_fdstat_set_rights',
  'fd_filestat_get',
  'fd_filestat_set_size',
  'fd_filestat_set_times',
  'fd_pread',
  'fd_prestat_get',
  'fd_prestat_dir_name',
  'fd_pwrite',
  'fd_read',
  'fd_readdir',
  'fd_renumber',
  'fd_seek',
  'fd_sync',
  'fd_tell',
  'fd_write',
  'path_create_directory',
  'path_filestat_get',
  'path_filestat_set_times',
  'path_link',
  'path_open',
  'path_readlink',
  'path_remove_directory',
  'path_rename',
  'path_symlink',
  'path_unlink_file',
  'poll_oneoff',
  'proc_exit',
  'proc_raise',
  'sched_yield',
  'random_get',
  'sock_accept',
  'sock_recv',
  'sock_send',
  'sock_shutdown',
] as const;

/** 2022-01-01T00:00:00Z, the start of the wall clock (wazero's convention). */
export const WALL_CLOCK_START_NS = 1_640_995_200n * 1_000_000_000n;
const TICK_NS = 1_000_000n;

export const ERRNO = {
  success: 0,
  badf: 8,
  fault: 21,
  inval: 28,
  nosys: 52,
  notsup: 58,
  spipe: 70,
  notcapable: 76,
} as const;

const FILETYPE_CHARACTER_DEVICE = 2;
const EVENTTYPE = { clock: 0, fdRead: 1, fdWrite: 2 } as const;
const SUBCLOCKFLAG_ABSTIME = 1;

/** Thrown by `proc_exit` to unwind the module with its exit code. */
export class ProcExit {
  constructor(readonly code: number) {}
}

/** Thrown when the module writes more than the stdout cap. */
export class OutputOverflow {}

/** Thrown by `proc_raise`. */
export class RaisedSignal {
  constructor(readonly signal: number) {}
}

export interface WasiCall {
  /** argv: the evaluator name only. */
  args: readonly string[];
  stdin: Uint8Array;
  /** 32-byte AES key of this record's random stream. */
  randomKey: Uint8Array;
  maxStdout: number;
}

function join(chunks: readonly Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

type HostFn = (...args: (number | bigint)[]) => number;

export class WasiHost {
  private memory: WebAssembly.Memory | undefined;
  private stdinPos = 0;
  private clockNs = 0n;
  private readonly random;
  private readonly stdoutChunks: Uint8Array[] = [];
  private stdoutBytes = 0;
  private readonly argBytes: Uint8Array[];

  constructor(private readonly call: WasiCall) {
    this.random = createCipheriv('aes-256-ctr', call.randomKey, Buffer.alloc(16));
    this.argBytes = call.args.map((a) => new TextEncoder().encode(`${a}\0`));
  }

  bind(memory: WebAssembly.Memory): void {
    this.memory = memory;
  }

  /** A fresh array (never a pooled Buffer), so the worker can transfer it. */
  get stdout(): Uint8Array {
    return join(this.stdoutChunks, this.stdoutBytes);
  }

  get stdinConsumed(): number {
    return this.stdinPos;
  }

  private view(): DataView {
    if (this.memory === undefined) throw new Error('memory is not bound');
    return new DataView(this.memory.buffer);
  }

  private bytes(ptr: number, len: number): Uint8Array {
    if (this.memory === undefined) throw new Error('memory is not bound');
    return new Uint8Array(this.memory.buffer, ptr, len);
  }

  /** Reads the clock, then advances it one tick: every read sees a later time. */
  private tick(): bigint {
    const now = this.clockNs;
    this.clockNs += TICK_NS;
    return now;
  }

  private readStdin(iovs: number, count: number): number {
    const v = this.view();
    let total = 0;
    for (let i = 0; i < count; i++) {
      const buf = v.getUint32(iovs + i * 8, true);
      const len = v.getUint32(iovs + i * 8 + 4, true);
      const n = Math.min(len, this.call.stdin.length - this.stdinPos);
      this.bytes(buf, n).set(this.call.stdin.subarray(this.stdinPos, this.stdinPos + n));
      this.stdinPos += n;
      total += n;
      if (n < len) break;
    }
    return total;
  }

  private write(fd: number, iovs: number, count: number): number {
    const v = this.view();
    let total = 0;
    for (let i = 0; i < count; i++) {
      const buf = v.getUint32(iovs + i * 8, true);
      const len = v.getUint32(iovs + i * 8 + 4, true);
      if (fd === 1) {
        if (this.stdoutBytes + len > this.call.maxStdout) throw new OutputOverflow();
        this.stdoutChunks.push(this.bytes(buf, len).slice());
        this.stdoutBytes += len;
      }
      total += len;
    }
    return total;
  }

  private pollOneoff(inPtr: number, outPtr: number, count: number, neventsPtr: number): number {
    const v = this.view();
    const ready: { userdata: bigint; type: number; nbytes: bigint }[] = [];
    let sleepNs: bigint | undefined;
    let sleeper: bigint | undefined;
    for (let i = 0; i < count; i++) {
      const at = inPtr + i * 48;
      const userdata = v.getBigUint64(at, true);
      const tag = v.getUint8(at + 8);
      if (tag === EVENTTYPE.clock) {
        const timeout = v.getBigUint64(at + 24, true);
        const flags = v.getUint16(at + 40, true);
        const clockId = v.getUint32(at + 16, true);
        const base = clockId === 0 ? WALL_CLOCK_START_NS + this.clockNs : this.clockNs;
        const wait = (flags & SUBCLOCKFLAG_ABSTIME) !== 0 ? timeout - base : timeout;
        const ns = wait > 0n ? wait : 0n;
        if (sleepNs === undefined || ns < sleepNs) {
          sleepNs = ns;
          sleeper = userdata;
        }
      } else {
        const fd = v.getUint32(at + 16, true);
        if (tag === EVENTTYPE.fdRead && fd === 0) {
          ready.push({
            userdata,
            type: tag,
            nbytes: BigInt(this.call.stdin.length - this.stdinPos),
          });
        } else if (tag === EVENTTYPE.fdWrite && (fd === 1 || fd === 2)) {
          ready.push({ userdata, type: tag, nbytes: 0n });
        }
      }
    }
    // Nothing ready: the sleep completes at once, moving the clock instead of the thread.
    if (ready.length === 0 && sleepNs !== undefined && sleeper !== undefined) {
      this.clockNs += sleepNs;
      ready.push({ userdata: sleeper, type: EVENTTYPE.clock, nbytes: 0n });
    }
    ready.forEach((e, i) => {
      const at = outPtr + i * 32;
      this.bytes(at, 32).fill(0);
      v.setBigUint64(at, e.userdata, true);
      v.setUint8(at + 10, e.type);
      v.setBigUint64(at + 16, e.nbytes, true);
    });
    v.setUint32(neventsPtr, ready.length, true);
    return ERRNO.success;
  }

  private writeStrings(list: readonly Uint8Array[], ptrs: number, buf: number): number {
    const v = this.view();
    let at = buf;
    list.forEach((s, i) => {
      v.setUint32(ptrs + i * 4, at, true);
      this.bytes(at, s.length).set(s);
      at += s.length;
    });
    return ERRNO.success;
  }

  private sizes(list: readonly Uint8Array[], countPtr: number, sizePtr: number): number {
    const v = this.view();
    v.setUint32(countPtr, list.length, true);
    v.setUint32(
      sizePtr,
      list.reduce((n, s) => n + s.length, 0),
      true,
    );
    return ERRNO.success;
  }

  /** The import object: every preview1 name, most of them refusing. */
  imports(): WebAssembly.Imports {
    const stdio = (fd: number | bigint) => Number(fd) <= 2;
    // Calls on descriptors: none exist beyond stdio, and stdio supports only reads and writes.
    const onFd =
      (stdioErrno: number): HostFn =>
      (fd) =>
        stdio(fd as number) ? stdioErrno : ERRNO.badf;
    const fns: Record<(typeof WASI_FUNCTIONS)[number], HostFn> = {
      args_get: (ptrs, buf) => this.writeStrings(this.argBytes, ptrs as number, buf as number),
      args_sizes_get: (c, s) => this.sizes(this.argBytes, c as number, s as number),
      environ_get: () => ERRNO.success,
      environ_sizes_get: (c, s) => this.sizes([], c as number, s as number),
      clock_res_get: (_id, ptr) => {
        this.view().setBigUint64(ptr as number, TICK_NS, true);
        return ERRNO.success;
      },
      clock_time_get: (id, _precision, ptr) => {
        if ((id as number) > 3) return ERRNO.inval;
        const now = this.tick();
        const value = id === 0 ? WALL_CLOCK_START_NS + now : now;
        this.view().setBigUint64(ptr as number, value, true);
        return ERRNO.success;
      },
      fd_advise: onFd(ERRNO.spipe),
      fd_allocate: onFd(ERRNO.notsup),
      fd_close: onFd(ERRNO.success),
      fd_datasync: onFd(ERRNO.inval),
      fd_fdstat_get: (fd, ptr) => {
        if (!stdio(fd)) return ERRNO.badf;
        this.bytes(ptr as number, 24).fill(0);
        this.view().setUint8(ptr as number, FILETYPE_CHARACTER_DEVICE);
        return ERRNO.success;
      },
      fd_fdstat_set_flags: onFd(ERRNO.notsup),
      fd_fdstat_set_rights: onFd(ERRNO.notsup),
      fd_filestat_get: (fd, ptr) => {
        if (!stdio(fd)) return ERRNO.badf;
        this.bytes(ptr as number, 64).fill(0);
        this.view().setUint8((ptr as number) + 16, FILETYPE_CHARACTER_DEVICE);
        return ERRNO.success;
      },
      fd_filestat_set_size: onFd(ERRNO.inval),
      fd_filestat_set_times: onFd(ERRNO.notsup),
      fd_pread: onFd(ERRNO.spipe),
      fd_prestat_get: () => ERRNO.badf,
      fd_prestat_dir_name: () => ERRNO.badf,
      fd_pwrite: onFd(ERRNO.spipe),
      fd_read: (fd, iovs, count, nread) => {
        if (fd !== 0) return ERRNO.badf;
        const n = this.readStdin(iovs as number, count as number);
        this.view().setUint32(nread as number, n, true);
        return ERRNO.success;
      },
      fd_readdir: onFd(ERRNO.notsup),
      fd_renumber: onFd(ERRNO.notsup),
      fd_seek: onFd(ERRNO.spipe),
      fd_sync: onFd(ERRNO.inval),
      fd_tell: onFd(ERRNO.spipe),
      fd_write: (fd, iovs, count, nwritten) => {
        if (fd !== 1 && fd !== 2) return ERRNO.badf;
        const n = this.write(fd as number, iovs as number, count as number);
        this.view().setUint32(nwritten as number, n, true);
        return ERRNO.success;
      },
      path_create_directory: () => ERRNO.notcapable,
      path_filestat_get: () => ERRNO.notcapable,
      path_filestat_set_times: () => ERRNO.notcapable,
      path_link: () => ERRNO.notcapable,
      path_open: () => ERRNO.notcapable,
      path_readlink: () => ERRNO.notcapable,
      path_remove_directory: () => ERRNO.notcapable,
      path_rename: () => ERRNO.notcapable,
      path_symlink: () => ERRNO.notcapable,
      path_unlink_file: () => ERRNO.notcapable,
      poll_oneoff: (i, o, n, e) =>
        this.pollOneoff(i as number, o as number, n as number, e as number),
      proc_exit: (code) => {
        throw new ProcExit(code as number);
      },
      proc_raise: (signal) => {
        throw new RaisedSignal(signal as number);
      },
      sched_yield: () => ERRNO.success,
      random_get: (ptr, len) => {
        const out = this.random.update(Buffer.alloc(len as number));
        this.bytes(ptr as number, len as number).set(out);
        return ERRNO.success;
      },
      sock_accept: () => ERRNO.nosys,
      sock_recv: () => ERRNO.nosys,
      sock_send: () => ERRNO.nosys,
      sock_shutdown: () => ERRNO.nosys,
    };
    return { wasi_snapshot_preview1: fns };
  }
}
