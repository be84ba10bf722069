/** The shapes the UI reads from the REST API (docs/api.md), as far as it uses them. */

export type Outcome = 'OUTCOME_SCORED' | 'OUTCOME_SKIPPED' | 'OUTCOME_ERROR';

export interface Score {
  name: string;
  value?: number;
  passed?: boolean;
  label?: string;
  explanation?: string;
  metadata?: Record<string, unknown>;
}

export interface Result {
  evaluator: string;
  outcome: Outcome;
  scores: Score[];
  reason?: string;
  durationMs: number;
  /** Set on human annotations: who gave the score. */
  annotator?: { kind: 'human'; principal: string };
}

export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  costUsd?: number;
  latencyMs?: number;
}

export interface TraceSummary {
  traceId: string;
  project: string;
  service: string;
  name: string;
  startTime: string;
  durationMs: number;
  steps: number;
  error: boolean;
  labels: Record<string, string>;
  source?: string;
  usage?: Usage;
  /** With `include=scores`: each policy's latest results. */
  scores?: Record<string, Result[]>;
}

export interface ToolCall {
  id?: string;
  name: string;
  arguments: string;
}

export interface Message {
  role: string;
  content?: unknown;
  name?: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
}

export type StepType =
  | 'llm'
  | 'tool'
  | 'retrieval'
  | 'agent'
  | 'handoff'
  | 'guardrail'
  | 'embedding'
  | 'generic';

export interface Step {
  type: StepType;
  name: string;
  model?: string;
  input?: unknown;
  output?: unknown;
  start?: string;
  end?: string;
  usage?: Usage;
  error: string;
  spanId?: string;
  parentSpanId?: string;
  attributes?: Record<string, unknown>;
}

export interface TraceRecord {
  id: string;
  input?: unknown;
  output?: unknown;
  reference?: unknown;
  context?: unknown[];
  metadata?: Record<string, unknown>;
  labels?: Record<string, string>;
  trajectory?: Step[];
  usage?: Usage;
  provenance?: Record<string, unknown>;
}

export interface Resource {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    labels?: Record<string, string>;
    generation?: number;
    createdAt?: string;
    updatedAt?: string;
  };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}
