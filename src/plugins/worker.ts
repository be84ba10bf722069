/**
 * Worker-thread entry of plug-in evaluation (see pool.ts). Each record gets a fresh instance of
 * the compiled module and a fresh WASI host, so nothing a module leaves in its memory reaches the
 * next record. A module that never returns is stopped from outside: the pool terminates this
 * thread at the deadline.
 */
import { parentPort } from 'node:worker_threads';
import { OutputOverflow, ProcExit, RaisedSignal, type WasiCall, WasiHost } from './wasi.js';

export type ToWorker =
  | { type: 'module'; sha256: string; module: WebAssembly.Module }
  | { type: 'run'; sha256: string; call: WasiCall };

/** How `_start` ended; `exit` carries the captured output. */
export type Ending =
  | { kind: 'exit'; code: number; stdout: Uint8Array; stdinRead: number }
  | { kind: 'trap'; message: string }
  | { kind: 'overflow' }
  | { kind: 'signal'; signal: number };

export interface FromWorker {
  ending: Ending;
}

const port = parentPort;
if (port === null) throw new Error('plug-in worker must run in a worker thread');
const modules = new Map<string, WebAssembly.Module>();

function run(sha256: string, call: WasiCall): Ending {
  const module = modules.get(sha256);
  if (module === undefined) return { kind: 'trap', message: 'module not loaded in this worker' };
  const host = new WasiHost(call);
  const done = (code: number): Ending => ({
    kind: 'exit',
    code,
    stdout: host.stdout,
    stdinRead: host.stdinConsumed,
  });
  try {
    const instance = new WebAssembly.Instance(module, host.imports());
    host.bind(instance.exports.memory as WebAssembly.Memory);
    (instance.exports._start as () => void)();
    return done(0);
  } catch (err) {
    if (err instanceof ProcExit) return done(err.code);
    if (err instanceof OutputOverflow) return { kind: 'overflow' };
    if (err instanceof RaisedSignal) return { kind: 'signal', signal: err.signal };
    // Traps (unreachable, out-of-bounds, stack exhaustion) and faults in host calls given bad
    // pointers: the message comes from the engine, never from the record.
    const message = err instanceof Error ? `${err.name}: ${err.message}` : 'unknown failure';
    return { kind: 'trap', message: message.slice(0, 200) };
  }
}

port.on('message', (msg: ToWorker) => {
  if (msg.type === 'module') {
    modules.set(msg.sha256, msg.module);
    return;
  }
  const ending = run(msg.sha256, msg.call);
  const transfer = ending.kind === 'exit' ? [ending.stdout.buffer] : [];
  port.postMessage({ ending } satisfies FromWorker, transfer as ArrayBuffer[]);
});
