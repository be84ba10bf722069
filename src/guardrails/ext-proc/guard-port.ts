import type { Principal } from '../../auth/index.js';

/**
 * The guard engine's surface the external processor calls: the decision of a named guard policy
 * for a principal. The engine never throws; the processor still bounds the wait.
 */

export interface GuardMessage {
  role: string;
  content: string;
}

export interface GuardMcpCall {
  method: string;
  toolName?: string;
  arguments?: unknown;
}

export interface GuardSubject {
  phase: 'request' | 'response';
  messages: GuardMessage[];
  mcp?: GuardMcpCall;
  headers: Record<string, string>;
}

export type GuardDecision =
  | { action: 'allow'; reason: string }
  | { action: 'mask'; messages: GuardMessage[]; arguments?: unknown; reason: string }
  | { action: 'reject'; status: number; message: string; reason: string };

export interface Guard {
  decide(
    policyName: string,
    subject: GuardSubject,
    principal: Principal,
    project?: string,
  ): Promise<GuardDecision>;
}
