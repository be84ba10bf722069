import { z } from 'zod';
import { authorize, type Principal, principalId } from '../auth/index.js';
import {
  type Annotator,
  type Clock,
  describeDetails,
  HUMAN_ANNOTATIONS,
  issuesToDetails,
  type Result,
  type Score,
  uniqueDetails,
} from '../core/index.js';
import { type TraceQueries, traceSummaryView } from '../ingest/index.js';
import type { Store } from '../store/index.js';
import type { PolicyEventSink, ResultSink } from './engine.js';
import { PolicyErrors } from './error-codes.js';

/** Longest label, in characters. */
export const MAX_LABEL_CHARS = 256;
/** Longest comment, in characters. */
export const MAX_COMMENT_CHARS = 4096;

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
// Control characters other than tab and line breaks have no place in a label or a comment.
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

const printable = (max: number) =>
  z
    .string()
    .min(1)
    .max(max, `at most ${max} characters`)
    .refine((text) => !CONTROL.test(text), 'control characters are not allowed');

export const AnnotationSchema = z
  .strictObject({
    name: z.string().regex(NAME, '1–64 letters, digits, _ . - starting with a letter or digit'),
    value: z.number().min(0).max(1).optional(),
    passed: z.boolean().optional(),
    label: printable(MAX_LABEL_CHARS).optional(),
    comment: printable(MAX_COMMENT_CHARS).optional(),
  })
  .refine((a) => [a.value, a.passed, a.label].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of value (0–1), passed (true/false) or label',
    path: ['value'],
  });
export type AnnotationInput = z.infer<typeof AnnotationSchema>;

export interface AnnotationServiceDeps {
  store: Store;
  clock: Clock;
  traces: TraceQueries;
  events: PolicyEventSink;
  /** What follows stored results (write-back to a pulled trace's store). */
  sinks?: readonly ResultSink[];
  /** `traces.redaction`'s text rules, applied to free text before it is stored. */
  redactText(text: string): string;
}

/** What an annotation answers: where it went and the stored result. */
export interface AnnotationView {
  project: string;
  traceId: string;
  policy: typeof HUMAN_ANNOTATIONS;
  result: Result;
}

/**
 * Human annotation: a person scores a trace. The score is stored as a result of the `@human`
 * group (one per person and name: annotating again replaces it), and follows the path of a
 * policy's results in the same transaction: a `trace.scored` event, and write-back for a pulled
 * trace whose source writes back.
 */
export class AnnotationService {
  constructor(private readonly deps: AnnotationServiceDeps) {}

  async annotate(
    principal: Principal,
    project: string | undefined,
    traceId: string,
    body: unknown,
  ): Promise<AnnotationView> {
    const target = authorize(principal, 'traces.annotate', project);
    const parsed = AnnotationSchema.safeParse(body);
    if (!parsed.success) {
      const details = uniqueDetails(issuesToDetails(parsed.error.issues));
      throw PolicyErrors.ANNOTATION_INVALID(`invalid annotation: ${describeDetails(details)}`, {
        details,
      });
    }
    // The caller's grant decides visibility: a trace it cannot read is not found.
    const { trace } = await this.deps.traces.get(principal, target, traceId, 'traces.annotate');
    const annotator: Annotator = { kind: 'human', principal: principalId(principal) };
    const result = { ...this.toResult(parsed.data), annotator };
    const { store, clock, events } = this.deps;
    await store.withTransaction(async (tx) => {
      await tx.results.annotate({
        project: trace.project,
        traceId: trace.traceId,
        result,
        annotatedAt: clock.now(),
      });
      const results = [result];
      await events.emitEvent(tx, {
        type: 'trace.scored',
        project: trace.project,
        policy: HUMAN_ANNOTATIONS,
        trace: traceSummaryView(trace),
        results,
      });
      for (const sink of this.deps.sinks ?? []) {
        await sink.onStored(tx, {
          trace,
          policy: HUMAN_ANNOTATIONS,
          digest: trace.digest,
          results,
          judged: new Set(),
        });
      }
    });
    return { project: trace.project, traceId: trace.traceId, policy: HUMAN_ANNOTATIONS, result };
  }

  private toResult(input: AnnotationInput): Result {
    const { redactText } = this.deps;
    const score: Score = { name: input.name };
    if (input.value !== undefined) score.value = input.value;
    if (input.passed !== undefined) score.passed = input.passed;
    if (input.label !== undefined) score.label = redactText(input.label);
    if (input.comment !== undefined) score.explanation = redactText(input.comment);
    return { evaluator: input.name, outcome: 'OUTCOME_SCORED', scores: [score], durationMs: 0 };
  }
}
