import type { z } from 'zod';
import type { EvalRecord, Score, Usage } from '../core/index.js';

/**
 * The evaluator contract. An evaluator type is a factory with a manifest: it declares what a
 * record must carry for it to run (`needs`) and the scores it produces; its params are validated
 * once, when it is bound (at apply or request validation), never per record. The runner turns a
 * missing need into OUTCOME_SKIPPED and an exception into OUTCOME_ERROR — never a zero.
 */

export const NEEDS = ['input', 'output', 'reference', 'context', 'trajectory', 'judge'] as const;
export type Need = (typeof NEEDS)[number];

export interface ScoreSpec {
  /** Local score name; see `metricName` in the runner for the name a result carries. */
  name: string;
  kind: 'number' | 'passed' | 'label';
  /** For numbers: the inclusive range, when bounded. */
  range?: [number, number];
  higherIsBetter?: boolean;
}

export interface EvaluatorManifest<P extends z.ZodType = z.ZodType> {
  /** Kebab-case type name used as `ref`, e.g. `exact-match`. */
  type: string;
  description: string;
  needs: readonly Need[];
  scores: readonly ScoreSpec[];
  /** Validates and defaults params; its errors name the field. */
  params: P;
  /** True for evaluators without model calls; policies run cheap stages first. */
  cheap: boolean;
  /** Set for plug-in evaluators (src/plugins): what pins them, and their params' own schema. */
  plugin?: PluginOrigin;
}

/** Where a plug-in evaluator comes from, as `GET /v1alpha1/evaluators` shows it. */
export interface PluginOrigin {
  name: string;
  version: string;
  /** sha256 of the module's bytes, as its manifest pins it. */
  sha256: string;
  /** sha256 of the manifest's bytes, as the plug-in index pins it. */
  manifestSha256: string;
  /** The params' JSON Schema from the manifest. */
  paramsSchema: Record<string, unknown>;
}

/** Chat completion as a judge answers it. */
export interface JudgeResponse {
  content: string;
  model: string;
  usage: Usage;
  cached: boolean;
}

export interface JudgeRequest {
  messages: { role: 'system' | 'user' | 'assistant'; content: string }[];
  /** Prompt version, part of the cache key: bump when a prompt template changes. */
  promptVersion: string;
  /** Ask for a JSON object answer (OpenAI `response_format: json_object`). */
  json?: boolean;
  /** Sampling temperature, default 0. Answers sampled above 0 are never cached (trials need fresh samples). */
  temperature?: number;
  maxTokens?: number;
  /**
   * Interprets an answer (fresh or cached); throwing rejects it, so a malformed verdict fails the
   * call and is never cached.
   */
  validate?: (content: string) => void;
}

/** A configured judge model. Implementations handle rate limits, retries and caching. */
export interface Judge {
  readonly name: string;
  readonly model: string;
  complete(request: JudgeRequest, signal?: AbortSignal): Promise<JudgeResponse>;
}

export interface EvalContext {
  /** The judge for this evaluation, when one is configured. */
  judge?: Judge;
  signal?: AbortSignal;
}

/** What an evaluation returns: scores, or a reason it cannot score this record. */
export type EvalOutput = { scores: Score[] } | { skip: string };

export interface BoundEvaluator {
  evaluate(record: EvalRecord, ctx: EvalContext): EvalOutput | Promise<EvalOutput>;
}

export interface EvaluatorFactory<P extends z.ZodType = z.ZodType> {
  manifest: EvaluatorManifest<P>;
  /** Called with validated params. May throw `invalid_argument` errors for cross-field rules. */
  bind(params: z.infer<P>): BoundEvaluator;
}

/** Helper that keeps the params type flowing from the schema to `bind`. */
export function defineEvaluator<P extends z.ZodType>(
  factory: EvaluatorFactory<P>,
): EvaluatorFactory<P> {
  return factory;
}
