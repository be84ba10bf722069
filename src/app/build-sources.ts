import type { Config } from '../config/index.js';
import { normalizeStoredTrace, PulledTraceWriter, type SpanLimits } from '../ingest/index.js';
import type { Redactor } from '../redaction/index.js';
import {
  compileOverrides,
  SourceDirectory,
  SourceManager,
  type SourceManagerDeps,
  SourceResultSink,
  WriteBackWriter,
} from '../sources/index.js';
import type { BuildBase } from './base.js';

/**
 * Pulling from trace sources and writing scores back to them: the manager, the write-back
 * writer, the directory both read sources from, and the result sink policies and annotations
 * hand their results to.
 */
export function buildSourcePulling(
  config: Readonly<Config>,
  deps: BuildBase & {
    redactor: Redactor;
    limits: SpanLimits;
    connector: SourceManagerDeps['connector'];
  },
) {
  const { store, clock, logger, metrics, redactor, connector } = deps;
  const directory = new SourceDirectory({ store, clock });
  const pulled = new PulledTraceWriter({
    store,
    redactor,
    clock,
    normalize: normalizeStoredTrace,
    observer: metrics,
    limits: deps.limits,
  });
  const manager = new SourceManager({
    store,
    clock,
    connector,
    write: (trace, adjust) => pulled.write(trace, adjust),
    overrides: (source) => {
      const project = source.project ?? 'default';
      return compileOverrides(source, project, (field, reason) =>
        metrics.onOverrideError(project, source.name, field, reason),
      );
    },
    observer: metrics,
    logger,
    redactText: (text) => redactor.redactText(text),
    options: { maxRecordsPerSecond: config.sources.max_records_per_second },
  });
  const writeBacks = new WriteBackWriter({
    store,
    clock,
    directory,
    connector,
    observer: metrics,
    logger,
    redactText: (text) => redactor.redactText(text),
  });
  return { directory, sinks: [new SourceResultSink({ directory, clock })], manager, writeBacks };
}
