import type { Message, Span, StepType } from '../../core/index.js';

/**
 * The contract every convention module implements. A reader looks at ONE span and answers, for
 * each Step field, what its own convention says (or `undefined`: "my convention says nothing").
 * It never decides between conventions: `precedence.ts` asks the readers field by field in the
 * order of conventions reference §10, and `trajectory.ts` applies the cross-span rules (§11).
 */

/** What a reader may know about the span's place in the trace (some kinds depend on it). */
export interface SpanContext {
  /** The span has no parent (a trace root). */
  readonly isRoot: boolean;
  /** The span's descendants present in the trace, in no particular order. */
  descendants(): readonly Span[];
}

export interface ToolCallReading {
  /** Tool name. */
  name?: string;
  /** Tool call id (links the step to the model's tool call). */
  id?: string;
  /** The arguments exactly as sent, as a string (malformed arguments are evaluable). */
  arguments?: string;
  /** The result: text or JSON. `resultPresent` tells an absent result from a `null` one. */
  result?: unknown;
  resultPresent?: boolean;
  /** A failure the convention reports inside the result (a ToolMessage with status "error"). */
  error?: string;
}

export interface UsageReading {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  costUsd?: number;
}

export interface ModelReading {
  /** The model that answered. */
  response?: string;
  /** The model asked for. */
  request?: string;
}

export interface IoReading {
  input?: unknown;
  output?: unknown;
}

export interface MessagesReading {
  input?: Message[];
  output?: Message[];
}

/** Step kind as a reader sees it. */
export interface TypeReading {
  type: StepType;
  /** An evaluation run inside the trace: kept as a generic step, its children are not steps. */
  evaluator?: boolean;
}

/**
 * Every span attribute a reader may read, in any of its methods. Normalization asks a reader
 * about a span only when the span carries one of these keys (or `without` says otherwise), so a
 * read not declared here is a reading silently lost: readers.test.ts records every read of every
 * reader over the recorded fixtures and fails on an undeclared one.
 */
export interface ReaderKeys {
  /** Keys read by their exact name. */
  readonly keys: readonly string[];
  /** Key prefixes: any key starting with one may be read (namespaces, indexed families). */
  readonly prefixes: readonly string[];
  /** Spans the reader may answer for without any of its keys (by span name, scope or events). */
  readonly without?: (span: Span) => boolean;
}

export interface ConventionReader {
  /** Short name, used in precedence tables, record metadata and docs. */
  readonly name: string;
  /** The attributes it reads (every method, every branch). */
  readonly reads: ReaderKeys;
  /** True when the span carries this convention at all. */
  detect(span: Span): boolean;
  /** Step kind from the convention's explicit kind attribute (§10.1 steps 1–6). */
  stepType?(span: Span, ctx: SpanContext): TypeReading | undefined;
  /** Step kind from fingerprints and attribute presence (§10.1 steps 7–8). */
  impliedType?(span: Span): StepType | undefined;
  /** Display name: tool, agent or rendered span name when the convention has a better one. */
  stepName?(span: Span, type: StepType): string | undefined;
  model?(span: Span): ModelReading | undefined;
  /** Chat messages of a model call. */
  messages?(span: Span): MessagesReading | undefined;
  /** Tool call details of a tool span. */
  toolCall?(span: Span): ToolCallReading | undefined;
  /** Opaque input/output (agent, retrieval, handoff, guardrail, generic; llm fallback). */
  io?(span: Span, type: StepType): IoReading | undefined;
  /** Record-level input/output written on a span (Langfuse `langfuse.trace.*`). */
  traceIo?(span: Span): IoReading | undefined;
  usage?(span: Span): UsageReading | undefined;
  /** A failure the convention reports besides span status and exception events. */
  error?(span: Span): string | undefined;
  session?(span: Span): string | undefined;
  user?(span: Span): string | undefined;
  /** `touchstone.label.<key>` entries hidden in this convention's metadata containers. */
  labels?(span: Span): Record<string, string> | undefined;
}

/** The reading when it holds any count or cost; else undefined (the convention says nothing). */
export function usageReading(u: UsageReading): UsageReading | undefined {
  return u.inputTokens !== undefined ||
    u.outputTokens !== undefined ||
    u.totalTokens !== undefined ||
    u.costUsd !== undefined
    ? u
    : undefined;
}

/** What every label key holds, under whatever container prefix. */
export const LABEL_PREFIX = 'touchstone.label.';

/**
 * `touchstone.label.<key>` entries of a span's attributes under a container prefix; only the
 * keys that hold the prefix are read (the rest are not looked at, so a reader that declares the
 * prefix reads nothing else).
 */
export function attributeLabels(
  attributes: Span['attributes'],
  prefix = '',
  decode?: (value: unknown) => unknown,
): Record<string, string> | undefined {
  const head = prefix + LABEL_PREFIX;
  let entries: [string, unknown][] | undefined;
  for (const key in attributes) {
    if (!key.startsWith(head)) continue;
    entries ??= [];
    entries.push([key, attributes[key]]);
  }
  return entries === undefined ? undefined : labelsFrom(entries, prefix, decode);
}

/**
 * Collects `touchstone.label.<key>` entries from a flat map (the key may also sit under a
 * container prefix such as `langfuse.trace.metadata.`). Strings, numbers and booleans become
 * strings; other values are not labels.
 */
export function labelsFrom(
  entries: Iterable<[string, unknown]>,
  prefix = '',
  decode?: (value: unknown) => unknown,
): Record<string, string> | undefined {
  let out: Record<string, string> | undefined;
  const head = prefix + LABEL_PREFIX;
  for (const [key, raw] of entries) {
    if (!key.startsWith(head)) continue;
    const name = key.slice(head.length);
    if (!name) continue;
    const value = decode ? decode(raw) : raw;
    if (typeof value === 'string' || typeof value === 'boolean') {
      out ??= {};
      out[name] = String(value);
    } else if (typeof value === 'number' && Number.isFinite(value)) {
      out ??= {};
      out[name] = String(value);
    }
  }
  return out;
}
