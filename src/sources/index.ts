/**
 * @module sources
 * Trace sources: the TraceSource resource, the manager that pulls traces from external stores
 * (watermark, per-source lease, deferral, version skip, rate cap, backoff, status), write-back of
 * scores with its ledger, and the connectors (connectors/<store>). A connector only lists,
 * fetches and writes back; each store or variant is one declaration (type, variant,
 * capabilities, config schema, rules, defaults) in the static list of connectors/index.ts, and
 * gets its settings from the caller. Imports core, config, net, store ports and other areas'
 * index only.
 */
export type * from './connector.js';
export { CAPABILITIES, DEFAULT_CONNECTOR_SETTINGS, defineConnector } from './connector.js';
export {
  BUILTIN_CONNECTORS,
  CONNECTOR_FACTORIES,
  type ConnectorBuilder,
  ConnectorRegistry,
  findConnector,
  refusedVariant,
} from './connectors/index.js';
export { SOURCE_RESOURCE } from './descriptor.js';
export { SourceErrors } from './error-codes.js';
export { FeedbackSink, resultSinks } from './feedback.js';
export {
  DEFAULT_MANAGER_OPTIONS,
  headerVersion,
  SourceManager,
  type SourceManagerDeps,
  type SourceManagerOptions,
  type SourceObserver,
} from './manager.js';
export { compileOverrides } from './overrides.js';
export {
  API_VERSION,
  KIND,
  type ParsedSource,
  parseSource,
  SourceResourceSchema,
  type SourceSpec,
  SourceSpecSchema,
} from './resource.js';
export {
  type DeadLetterView,
  type GrantCheck,
  SourceService,
  type SourceServiceDeps,
  type SourceStatus,
  type SourceView,
} from './service.js';
export { SOURCE_PHASES, type SourcePhase } from './states.js';
export {
  SourceDirectory,
  SourceResultSink,
  type WriteBackObserver,
  WriteBackWriter,
  writeBackRows,
} from './write-back.js';
