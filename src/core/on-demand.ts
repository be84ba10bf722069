/**
 * A loader run at its first call, its promise shared after: for the modules only a feature in use
 * needs (`onDemand(() => import('x'))`), so a thread that never uses the feature never loads them
 * (docs/performance.md, "Modules loaded on demand").
 */
export function onDemand<T>(load: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | undefined;
  return () => {
    loaded ??= load();
    return loaded;
  };
}
