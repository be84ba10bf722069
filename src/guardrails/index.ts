/**
 * @module guardrails
 * Gateway guardrails: GuardPolicy resources and the guard engine that decides allow, mask or
 * reject on a gateway's messages or MCP tool calls (PII and secret detectors of `redaction`, RE2
 * deny lists, prompt-injection heuristics, CEL conditions, an LLM judge). The prompt-guard
 * webhook (api/) and the external processor (`ext-proc/`: Envoy ext_proc v3 over gRPC) call
 * `GuardEngine.decide`. docs/guardrails.md
 */
import type { ExtProcServer, ExtProcServerDeps } from './ext-proc/index.js';

export {
  CANNOT_DECIDE_STATUS,
  type CheckOutcome,
  type CompiledGuardPolicy,
  compileGuardPolicy,
  GuardEngine,
  type GuardEngineDeps,
  type GuardPolicySource,
  type GuardRecorder,
  MAX_SUBJECT_CHARS,
  POLICY_CACHE_MS,
} from './engine.js';
export { GuardErrors } from './error-codes.js';
export type {
  ExtProcServer,
  ExtProcServerDeps,
  ExtProcSettings,
  Guard,
  StreamCaller,
} from './ext-proc/index.js';
export {
  MAX_MESSAGES,
  type PromptGuardAnswer,
  PromptGuardRequestSchema,
  PromptGuardResponseSchema,
  promptGuardAnswer,
  promptGuardSubject,
  rejectAnswer,
} from './prompt-guard.js';
export { GUARD_SERVICE, TraceRecorder } from './recorder.js';
export {
  DEFAULT_DEADLINE,
  GUARD_KIND,
  type GuardCheckSpec,
  GuardPolicyResourceSchema,
  type GuardSpec,
  guardPolicyResource,
  MAX_DEADLINE_MS,
  type ParsedGuardPolicy,
  parseGuardPolicy,
} from './resource.js';
export {
  GUARD_POLICY_RESOURCE,
  GuardPolicyService,
  type GuardPolicyServiceDeps,
  type GuardPolicyView,
} from './service.js';
export type {
  GuardDecision,
  GuardDecisionEvent,
  GuardMcpCall,
  GuardMessage,
  GuardObserver,
  GuardPhase,
  GuardSubject,
} from './types.js';

/**
 * The Envoy external processor. Its code and Envoy's message types (about 1.3 MB of heap) are
 * loaded only by a server that has one configured.
 */
export async function createExtProcServer(deps: ExtProcServerDeps): Promise<ExtProcServer> {
  const extProc = await import('./ext-proc/index.js');
  return extProc.createExtProcServer(deps);
}
