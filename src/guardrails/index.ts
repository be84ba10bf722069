/**
 * @module guardrails
 * Gateway guardrails: the Envoy external processor (ext_proc v3 over gRPC, `ext-proc/`) that
 * guards MCP traffic with the guard engine's decisions. Imports domain areas through their
 * index; never the edges or the composition root. docs/guardrails.md
 */
export {
  createExtProcServer,
  type ExtProcServer,
  type ExtProcServerDeps,
  type ExtProcSettings,
  type Guard,
  type GuardDecision,
  type GuardSubject,
  POLICY_METADATA,
  PROJECT_METADATA,
  processStream,
  type StreamCaller,
} from './ext-proc/index.js';
