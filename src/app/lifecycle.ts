import { type Component, component } from '../core/index.js';

/** A background loop of an area (`start()`, `shutdown()`), as a component; `run: false` leaves it idle. */
export function loop(
  name: string,
  worker: { start(): void; shutdown(): Promise<void> },
  run = true,
): Component {
  return component(name, {
    ...(run ? { start: () => worker.start() } : {}),
    stop: () => worker.shutdown(),
  });
}

/** Something built open (a store, an HTTP client's connection pool): nothing to start, closed on stop. */
export function closes(name: string, resource: { close(): Promise<void> }): Component {
  return component(name, { stop: () => resource.close() });
}
