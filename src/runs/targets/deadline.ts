import { TargetErrors } from './error-codes.js';

/**
 * Runs `fn` under one deadline covering everything a call does (every HTTP attempt and the waits
 * between them, or a whole process). The signal handed to `fn` aborts with TARGET_TIMEOUT when
 * the deadline passes, or with the caller's reason when the caller aborts first.
 */
export async function withDeadline<T>(
  timeoutMs: number,
  caller: AbortSignal | undefined,
  what: string,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  caller?.throwIfAborted();
  const controller = new AbortController();
  const timer = setTimeout(
    () =>
      controller.abort(TargetErrors.TARGET_TIMEOUT(`${what} did not finish in ${timeoutMs} ms`)),
    timeoutMs,
  );
  const onAbort = () => controller.abort(caller?.reason);
  caller?.addEventListener('abort', onAbort, { once: true });
  try {
    return await fn(controller.signal);
  } catch (err) {
    // Whatever failed once the deadline passed (a closed socket, a killed process) is the timeout.
    if (controller.signal.aborted) throw controller.signal.reason;
    throw err;
  } finally {
    clearTimeout(timer);
    caller?.removeEventListener('abort', onAbort);
  }
}

/** Waits `ms`, or rejects with `signal.reason` as soon as it aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
