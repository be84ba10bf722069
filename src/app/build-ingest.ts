import type { Config } from '../config/index.js';
import { component, systemClock } from '../core/index.js';
import {
  CompleterThread,
  IngestService,
  normalizeStoredTrace,
  PrepareThreads,
  spanLimitsFromConfig,
  TraceCompleter,
} from '../ingest/index.js';
import { compileRedaction } from '../redaction/index.js';
import type { BuildBase } from './base.js';

/**
 * OTLP requests stored at once: SQLite writes one transaction at a time, so more would only queue
 * ahead of reads on its one connection; PostgreSQL gets half its pool, the rest stays for reads
 * and background work.
 */
export function ingestConcurrency(config: Readonly<Config>): number {
  return config.store.driver === 'sqlite' ? 1 : Math.max(1, Math.floor(config.store.pool_size / 2));
}

/**
 * Trace ingest and completion as configured, with the redactor and span limits that pulled traces
 * share. `onCompleted` runs after traces were completed (by a request, or the completion thread).
 * With `completesInScoringWorker`, the online scoring worker runs the completion loop (with the
 * rules returned here) and no completion worker is started.
 */
export function buildIngest(
  config: Readonly<Config>,
  deps: BuildBase & { onCompleted: () => void; completesInScoringWorker: boolean },
) {
  const { store, clock, logger, metrics } = deps;
  const redactor = compileRedaction(config.traces.redaction);
  const limits = spanLimitsFromConfig(config.traces.limits);
  // Whole traces complete in the request that brings them; the online engine is woken for them
  // as for the completer's.
  const ingest = new IngestService({
    store,
    redactor,
    clock,
    observer: metrics,
    limits,
    ...(config.traces.complete_on_arrival ? { normalize: normalizeStoredTrace } : {}),
    onCompleted: () => deps.onCompleted(),
  });
  const rules = {
    graceMs: config.traces.completion_grace,
    idleMs: config.traces.idle_timeout,
    maxAgeMs: config.traces.max_age,
  };
  const completer = new TraceCompleter({
    store,
    clock,
    rules,
    maxEventsPerSpan: limits.maxEventsPerSpan,
    normalize: normalizeStoredTrace,
    observer: metrics,
    logger,
  });
  // listen() completes traces in a worker thread (its own store connection) so normalizing does not
  // take CPU from ingest; an injected clock (tests) keeps completion in-process, driven by tick().
  // The scoring worker, when it runs, is that thread (it starts the in-process loop if it fails).
  const completion = deps.completesInScoringWorker
    ? undefined
    : clock === systemClock
      ? new CompleterThread({
          data: {
            store: config.store,
            dataDir: config.data_dir,
            rules,
            maxEventsPerSpan: limits.maxEventsPerSpan,
          },
          fallback: completer,
          onCompleted: (n) => {
            metrics.onCompleted(n);
            deps.onCompleted();
          },
          logger,
        })
      : completer;
  // OTLP trace requests are decoded, redacted and normalized in worker threads (listen() starts
  // them; until they run, and with an injected clock, the request's thread does it all).
  const size = config.traces.ingest_threads;
  const threads =
    clock === systemClock && size > 0
      ? new PrepareThreads({
          data: {
            redaction: config.traces.redaction,
            limits,
            completeOnArrival: config.traces.complete_on_arrival,
          },
          size,
          // Each worker's, one ready for each writer, and one more.
          ahead: size + ingestConcurrency(config) + 1,
          logger,
        })
      : undefined;
  const completing = component('trace-completion', {
    start: () => {
      threads?.start();
      completion?.start();
    },
    stop: async () => {
      await completion?.shutdown();
      await completer.shutdown();
      await threads?.shutdown();
    },
  });
  return { redactor, limits, rules, service: ingest, threads, completer, component: completing };
}
