import { z } from 'zod';

/**
 * The Record: what every door (direct evaluate, online policy, pulled trace, offline run)
 * hands to evaluators. Unknown fields are refused so a typo never silently drops data.
 */

export const STEP_TYPES = [
  'llm',
  'tool',
  'retrieval',
  'agent',
  'handoff',
  'guardrail',
  'embedding',
  'generic',
] as const;
export type StepType = (typeof STEP_TYPES)[number];

/** A tool call requested by a model. `arguments` stays the raw string: malformed JSON is evaluable. */
export const ToolCallSchema = z.strictObject({
  id: z.string().optional(),
  name: z.string(),
  arguments: z.string().default(''),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const MessageSchema = z.strictObject({
  role: z.string(),
  content: z.unknown().optional(),
  name: z.string().optional(),
  toolCalls: z.array(ToolCallSchema).optional(),
  toolCallId: z.string().optional(),
});
export type Message = z.infer<typeof MessageSchema>;

const count = z.number().finite().nonnegative();

export const UsageSchema = z.strictObject({
  inputTokens: count.optional(),
  outputTokens: count.optional(),
  totalTokens: count.optional(),
  costUsd: count.optional(),
  latencyMs: count.optional(),
});
export type Usage = z.infer<typeof UsageSchema>;

const timestamp = z.iso.datetime({ offset: true });

/**
 * What a span lost before it was stored, by its sender (OTLP's dropped counts) or by the ingest
 * limits (`traces.limits`): attributes, events and links past a count, and the attributes left
 * out of its events and links (summed). Absent when nothing was.
 */
export const DroppedSchema = z.strictObject({
  attributes: z.int().nonnegative().optional(),
  events: z.int().nonnegative().optional(),
  links: z.int().nonnegative().optional(),
  eventAttributes: z.int().nonnegative().optional(),
  linkAttributes: z.int().nonnegative().optional(),
});
export type Dropped = z.infer<typeof DroppedSchema>;

export const StepSchema = z.strictObject({
  type: z.enum(STEP_TYPES),
  /** Tool name for tool steps, span name otherwise. */
  name: z.string().default(''),
  /** Model name for llm steps. */
  model: z.string().optional(),
  /** Chat messages, text, or JSON. For tool steps, the raw argument string. */
  input: z.unknown().optional(),
  output: z.unknown().optional(),
  start: timestamp.optional(),
  end: timestamp.optional(),
  usage: UsageSchema.optional(),
  /** Empty on success. */
  error: z.string().default(''),
  spanId: z.string().optional(),
  parentSpanId: z.string().optional(),
  attributes: z.record(z.string(), z.unknown()).optional(),
  dropped: DroppedSchema.optional(),
});
export type Step = z.infer<typeof StepSchema>;

export const ProvenanceSchema = z.strictObject({
  traceId: z.string().optional(),
  source: z.string().optional(),
  runId: z.string().optional(),
  taskId: z.string().optional(),
  trial: z.number().int().nonnegative().optional(),
});
export type Provenance = z.infer<typeof ProvenanceSchema>;

export const RecordSchema = z.strictObject({
  id: z.string().min(1).max(512).optional(),
  input: z.unknown().optional(),
  output: z.unknown().optional(),
  /** A JSON list means "any of these". */
  reference: z.unknown().optional(),
  context: z.array(z.unknown()).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  trajectory: z.array(StepSchema).optional(),
  usage: UsageSchema.optional(),
  provenance: ProvenanceSchema.optional(),
});
/** A record as a caller sends it (`id` may be absent). */
export type RecordInput = z.input<typeof RecordSchema>;
/** A record after validation and id assignment. */
export type EvalRecord = z.infer<typeof RecordSchema> & { id: string };

export const OUTCOMES = ['OUTCOME_SCORED', 'OUTCOME_SKIPPED', 'OUTCOME_ERROR'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** One score: exactly one of `value`, `passed`, `label`. */
export const ScoreSchema = z
  .strictObject({
    name: z.string(),
    value: z.number().optional(),
    passed: z.boolean().optional(),
    label: z.string().optional(),
    explanation: z.string().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .refine(
    (s) => [s.value, s.passed, s.label].filter((v) => v !== undefined).length === 1,
    'a score has exactly one of value, passed, label',
  );
export type Score = z.infer<typeof ScoreSchema>;

/** Who gave a result that no evaluator computed: a person annotating a trace. */
export const AnnotatorSchema = z.strictObject({
  kind: z.literal('human'),
  /** The caller's principal (an API key's id; `anonymous` without auth). */
  principal: z.string(),
});
export type Annotator = z.infer<typeof AnnotatorSchema>;

export const ResultSchema = z.strictObject({
  evaluator: z.string(),
  outcome: z.enum(OUTCOMES),
  scores: z.array(ScoreSchema),
  reason: z.string().optional(),
  durationMs: z.number().nonnegative(),
  /** Present only on human annotations. */
  annotator: AnnotatorSchema.optional(),
});
export type Result = z.infer<typeof ResultSchema>;

/**
 * The results group (in place of a policy name) that holds a trace's human annotations. It is
 * not a valid resource name, so no policy can take it.
 */
export const HUMAN_ANNOTATIONS = '@human';

/** Numeric view of a score for means, windows, gates and CEL: pass/fail as 1/0, labels none. */
export function scoreNumber(score: Score): number | undefined {
  if (score.value !== undefined) return score.value;
  if (score.passed !== undefined) return score.passed ? 1 : 0;
  return undefined;
}
