import type { z } from 'zod';
import type { Judge, JudgeRequest, JudgeResponse } from '../contract.js';
import { JudgeErrors } from './error-codes.js';
import { truncate } from './fence.js';
import { parseJsonObject } from './json-answer.js';

const MAX_EXPLANATION = 2000;

export interface Verdict<T> {
  verdict: T;
  response: JudgeResponse;
}

/** Asks the judge and validates its JSON answer; a wrong answer is an error, never a score. */
export async function askJudge<S extends z.ZodType>(
  judge: Judge,
  request: JudgeRequest,
  schema: S,
  signal: AbortSignal | undefined,
): Promise<Verdict<z.infer<S>>> {
  let verdict: z.infer<S> | undefined;
  const interpret = (content: string) => {
    const object = parseJsonObject(content);
    if (object === undefined) {
      throw JudgeErrors.JUDGE_BAD_VERDICT(
        `judge "${judge.name}" did not answer with a JSON object`,
      );
    }
    const parsed = schema.safeParse(object);
    if (!parsed.success) {
      // Field paths only: zod messages may quote received values, which come from the model.
      const fields = [...new Set(parsed.error.issues.map((i) => i.path.map(String).join('.')))];
      throw JudgeErrors.JUDGE_BAD_VERDICT(
        `judge "${judge.name}" answered with an invalid verdict (wrong or missing: ${fields.join(', ') || 'the object'})`,
      );
    }
    verdict = parsed.data;
  };
  // The judge runs `interpret` before caching, so a bad verdict is never cached.
  const response = await judge.complete({ ...request, validate: interpret }, signal);
  if (verdict === undefined) interpret(response.content);
  return { verdict: verdict as z.infer<S>, response };
}

/** Maps a 1–5 rating onto [0, 1]. */
export function normalizeScore(score: number): number {
  return (score - 1) / 4;
}

export function explanation(reasoning: string): string {
  return truncate(reasoning.trim(), MAX_EXPLANATION);
}

/** Score metadata the spec names: judge model, prompt version, tokens. */
export function judgeMetadata(
  response: JudgeResponse,
  promptVersion: string,
  rawScore: number,
): Record<string, unknown> {
  return {
    judgeModel: response.model,
    promptVersion,
    cached: response.cached,
    inputTokens: response.usage.inputTokens,
    outputTokens: response.usage.outputTokens,
    rawScore,
  };
}
