/**
 * A part of the running service with a lifecycle: background loops, the HTTP server, clients and
 * the store. The composition root starts a list of them in order and stops them in reverse, so
 * whatever feeds another part stops before it (the server before the workers, the workers before
 * the store they write to).
 */
export interface Component {
  readonly name: string;
  start(): Promise<void>;
  /** Idempotent, and safe before (or without) `start()`: it releases what building acquired. */
  stop(): Promise<void>;
}

/**
 * A Component from start and stop steps (either may be left out). `stop()` runs its step once,
 * after a `start()` in progress settles; a `start()` after `stop()` does nothing, so a shutdown
 * signal during startup cannot leave a part running.
 */
export function component(
  name: string,
  steps: { start?: () => unknown; stop?: () => unknown },
): Component {
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  return {
    name,
    start() {
      if (stopping !== undefined) return Promise.resolve();
      starting ??= (async () => {
        await steps.start?.();
      })();
      return starting;
    },
    stop() {
      stopping ??= (async () => {
        await starting?.catch(() => undefined);
        await steps.stop?.();
      })();
      return stopping;
    },
  };
}

/**
 * Starts `components` in list order. If one fails to start, all of them are stopped (in reverse)
 * and its error is thrown: a half-started service holds nothing.
 */
export async function startAll(components: readonly Component[]): Promise<void> {
  try {
    for (const c of components) await c.start();
  } catch (err) {
    await stopAll(components).catch(() => undefined);
    throw err;
  }
}

/**
 * Stops `components` in reverse list order. One that fails to stop does not keep the rest running:
 * every one is stopped, then the first error is thrown.
 */
export async function stopAll(components: readonly Component[]): Promise<void> {
  const errors: unknown[] = [];
  for (const c of [...components].reverse()) {
    await c.stop().catch((err: unknown) => errors.push(err));
  }
  if (errors.length > 0) throw errors[0];
}
