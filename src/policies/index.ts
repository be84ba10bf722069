/**
 * @module policies
 * Online evaluation: the OnlineEvalPolicy resource (CEL selector, sampling, stages, alerts), the
 * engine that claims work items and stores results with their events, windows and alert states,
 * human annotations, and the scores read API. Imports core, config, store ports, auth, cel,
 * evaluators, idempotency, ingest and webhooks through their index; never api/ or a store adapter.
 */

export {
  type AnnotationInput,
  AnnotationSchema,
  AnnotationService,
  type AnnotationServiceDeps,
  type AnnotationView,
  MAX_COMMENT_CHARS,
  MAX_LABEL_CHARS,
} from './annotations.js';
export { POLICY_RESOURCE } from './descriptor.js';
export {
  DEFAULT_ENGINE_OPTIONS,
  PolicyEngine,
  type PolicyEngineDeps,
  type PolicyEngineObserver,
  type PolicyEngineOptions,
  type PolicyEventSink,
  type ResultSink,
  type StoredResults,
  samplePoint,
} from './engine.js';
export { PolicyErrors } from './error-codes.js';
export {
  API_VERSION,
  type CompiledPolicy,
  compilePolicy,
  KIND,
  type ParsedPolicy,
  PolicyResourceSchema,
  type PolicySink,
  PolicySpecSchema,
  PROJECT_LABEL,
  parsePolicy,
  SinkSchema,
} from './resource.js';
export { ScoreQueries, type ScoresEntry, scoresEntry } from './scores.js';
export type { ScoreSeries, SeriesAlert, SeriesPoint } from './series.js';
export {
  PolicyService,
  type PolicyServiceDeps,
  type PolicyView,
  type SeriesAnswer,
  type SeriesQuery,
} from './service.js';
