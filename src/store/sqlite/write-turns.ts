import { getEnvironmentData, setEnvironmentData } from 'node:worker_threads';

/**
 * Turns at SQLite's write lock between the threads of one process (the main thread and the
 * scoring or completion worker, each with its own connection).
 *
 * SQLite's lock is taken by trying: a statement that finds it held fails with SQLITE_BUSY and is
 * tried again later, so a thread learned that the lock was free only at its next try — a doubling
 * timer on the main thread, SQLite's own sleeps on a worker, each up to tens of milliseconds late.
 * Here every connection of the process tells the others when it lets the lock go (a transaction
 * ends: `released` is bumped and its waiters woken), and they try again at once. A worker's
 * statement waiting for the lock counts itself in `waiting` until it ran; the main thread, before
 * it begins a transaction, lets such a worker go first (for up to `GIVE_WAY_MS`), so that its own
 * transactions, following each other while requests queue, never starve the worker. Connections
 * of other processes are still found out by trying again after a timeout.
 *
 * The state is a SharedArrayBuffer put in the process's worker environment data by the first
 * connection of the main thread: workers started after it get the same memory.
 */
const KEY = 'touchstone.sqlite.write-turns';
const RELEASED = 0;
const WAITING = 1;

/** Longest the main thread lets a waiting worker go first. */
const GIVE_WAY_MS = 20;

let shared: Int32Array | undefined;

function state(): Int32Array {
  if (shared !== undefined) return shared;
  let buffer = getEnvironmentData(KEY) as SharedArrayBuffer | undefined;
  if (buffer === undefined) {
    buffer = new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT);
    setEnvironmentData(KEY, buffer);
  }
  shared = new Int32Array(buffer);
  return shared;
}

/** What a waiter compares against: read before the try that may find the lock held. */
export function releases(): number {
  return Atomics.load(state(), RELEASED);
}

/** This connection let the lock go: the others try again now. */
export function released(): void {
  const s = state();
  Atomics.add(s, RELEASED, 1);
  Atomics.notify(s, RELEASED);
}

/**
 * Waits (without blocking the thread) until a connection of the process lets the lock go after
 * `seen` was read, or `timeoutMs` passes.
 */
export async function releasedSince(seen: number, timeoutMs: number): Promise<void> {
  await changed(RELEASED, seen, timeoutMs);
}

/**
 * Resolves once `state()[index]` is no longer `value`, or after `timeoutMs`. A pending
 * `Atomics.waitAsync` does not keep Node's event loop alive, so a timer beside it does.
 */
async function changed(index: number, value: number, timeoutMs: number): Promise<void> {
  const wait = Atomics.waitAsync(state(), index, value, timeoutMs);
  if (!wait.async) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    wait.value,
    new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
  ]);
  clearTimeout(timer);
}

/** Blocks the (worker) thread until the lock is let go after `seen`, or `timeoutMs` passes. */
export function awaitReleaseBlocking(seen: number, timeoutMs: number): void {
  Atomics.wait(state(), RELEASED, seen, timeoutMs);
}

/**
 * A worker's statement waits for the lock, from its first SQLITE_BUSY until it ran or gave up
 * (`done`): the main thread gives way to it meanwhile.
 */
export function waitingForLock(): { done(): void } {
  const s = state();
  Atomics.add(s, WAITING, 1);
  return {
    done() {
      Atomics.sub(s, WAITING, 1);
      Atomics.notify(s, WAITING);
    },
  };
}

/** Whether a worker's statement waits for the lock (checked before `giveWayToWorkers`). */
export function workersWaiting(): boolean {
  return Atomics.load(state(), WAITING) > 0;
}

/** Lets a worker that waits for the lock take it first (main thread, before it begins). */
export async function giveWayToWorkers(): Promise<void> {
  const s = state();
  const deadline = performance.now() + GIVE_WAY_MS;
  for (;;) {
    const waiting = Atomics.load(s, WAITING);
    const left = deadline - performance.now();
    if (waiting === 0 || left <= 0) return;
    await changed(WAITING, waiting, left);
  }
}
