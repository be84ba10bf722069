/**
 * What the guard engine decides on and what it answers, shared by the prompt-guard webhook and the
 * external processor: one subject shape for LLM messages and MCP tool calls, three outcomes.
 */

/** One chat message as the gateways pass it: role and text only. */
export interface GuardMessage {
  role: string;
  content: string;
}

/** The MCP call a subject carries (the external processor's parsed JSON-RPC), when it is one. */
export interface GuardMcpCall {
  /** The JSON-RPC method (`tools/call`, `tools/list`, …). */
  method: string;
  /** `params.name` of a `tools/call`. */
  toolName?: string;
  /** `params.arguments` of a `tools/call`. */
  arguments?: unknown;
}

export type GuardPhase = 'request' | 'response';

/** What a decision is about: the messages of one phase, the MCP call if any, the headers. */
export interface GuardSubject {
  phase: GuardPhase;
  messages: GuardMessage[];
  mcp?: GuardMcpCall;
  /** Header names lowercase; what the gateway forwarded (never used in answers or logs). */
  headers: Record<string, string>;
}

/**
 * The outcome. `mask` carries the messages (same count and roles) and, for an MCP call, the
 * arguments with their string values masked. `reject` carries the HTTP status and the
 * client-visible plain text, which never quotes the subject. `reason` is a short machine-readable
 * word list for the gateway's logs and the decision trace.
 */
export type GuardDecision =
  | { action: 'allow'; reason: string }
  | { action: 'mask'; messages: GuardMessage[]; arguments?: unknown; reason: string }
  | { action: 'reject'; status: number; message: string; reason: string };

/** Told of every decision (metrics implement it; the guard area imports no telemetry). */
export interface GuardObserver {
  onGuardDecision(event: GuardDecisionEvent): void;
}

export interface GuardDecisionEvent {
  project: string;
  policy: string;
  phase: GuardPhase;
  action: GuardDecision['action'];
  /** `decided`, `fail_open` (a check could not decide and the policy fails open) or `cannot_decide`. */
  outcome: 'decided' | 'fail_open' | 'cannot_decide';
  seconds: number;
}
