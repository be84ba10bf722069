/**
 * @module runs
 * Offline runs: the run spec (dataset, target, harness, environment, evaluators, trials, gates),
 * the service behind REST and the CLI, the executor that claims runs under a lease and adopts
 * those of a dead replica, summaries and gates, and retention. `targets/` builds what produces a
 * run's outputs. Imports core, config, net, store ports and the index of evaluators and webhooks;
 * never api/, cli/ or a store adapter.
 */
export { RunErrors } from './error-codes.js';
export {
  type DatasetReader,
  DEFAULT_EXECUTOR_OPTIONS,
  RunExecutor,
  type RunExecutorDeps,
  type RunExecutorOptions,
  type RunObserver,
} from './executor.js';
export { type FinishOutcome, finalStatus, finishRun, type RunEventSink } from './finish.js';
export {
  evaluateGates,
  type Gate,
  type GateInput,
  type GateResult,
  GateSchema,
  gateView,
  parseGate,
} from './gates.js';
export { type RetentionOptions, RunRetention, SWEEP_INTERVAL_MS } from './retention.js';
export { RunService, type RunServiceDeps } from './service.js';
export {
  API_VERSION,
  type CompiledRun,
  compileStoredSpec,
  KEEP_LABEL,
  KIND,
  MAX_ITEMS,
  MAX_RECORDS,
  MAX_TRIALS,
  metricsOf,
  type ParsedRun,
  type ParseOptions,
  PROJECT_LABEL,
  parseRunSpec,
  RunPlainSchema,
  RunResourceSchema,
  type RunSpec,
  RunSpecSchema,
} from './spec.js';
export { FINAL_STATUSES, isFinal, RUN_STATUSES, type RunStatus } from './states.js';
export {
  type MetricInfo,
  type MetricSummary,
  passK,
  SummaryBuilder,
  summarize,
  tQuantile95,
  wilson,
} from './summaries.js';
export * from './targets/index.js';
export { itemView, type RunView, runView } from './view.js';
