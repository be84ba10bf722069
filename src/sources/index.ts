/**
 * @module sources
 * Trace sources: the TraceSource resource, the manager that pulls traces from external stores
 * (watermark, per-source lease, deferral, version skip, rate cap, backoff, status), write-back of
 * scores with its ledger, and the connectors (connectors/<store>). A connector only lists,
 * fetches and writes back. Imports core, config, net, store ports and other areas' index only.
 */
export type * from './connector.js';
export {
  CONNECTORS,
  type ConnectorContext,
  type ConnectorManifest,
  findConnector,
} from './connectors/index.js';
export { SOURCE_RESOURCE } from './descriptor.js';
export { SourceErrors } from './error-codes.js';
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
export {
  SourceDirectory,
  SourceResultSink,
  type WriteBackObserver,
  WriteBackWriter,
} from './write-back.js';
