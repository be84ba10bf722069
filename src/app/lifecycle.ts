import { type Component, component } from '../core/index.js';

/** An area's background loop (`start`, `shutdown`) as a component; `run: false`: left idle. */
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

/** Something built open (the store, an HTTP client's pool): nothing to start, closed on stop. */
export function closes(name: string, resource: { close(): Promise<void> }): Component {
  return component(name, { stop: () => resource.close() });
}
