/**
 * @module core
 * Domain types and schemas (Record, Step, Score, Result), the error type and its catalogue,
 * ids, the clock, the Component lifecycle, background loops (and a worker thread to run one in),
 * retry backoff, loading on demand and the one YAML reader. No I/O but starting worker threads;
 * imports nothing internal.
 */
export * from './background.js';
export * from './backoff.js';
export * from './clock.js';
export * from './component.js';
export * from './content.js';
export * from './errors.js';
export * from './glob.js';
export * from './ids.js';
export * from './issues.js';
export * from './on-demand.js';
export * from './record.js';
export * from './resource.js';
export * from './roles.js';
export * from './semaphore.js';
export * from './span.js';
export * from './trace.js';
export * from './url-path.js';
export * from './worker-thread.js';
export * from './yaml.js';
