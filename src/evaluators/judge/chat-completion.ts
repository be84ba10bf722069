import { z } from 'zod';
import type { TouchstoneError, Usage } from '../../core/index.js';

/**
 * What the judge client and the OpenAI-compatible run target share when they read a chat
 * completion: the `usage` object, the checked parse, and token counts under Touchstone's names.
 */

export const ChatUsageSchema = z
  .object({
    prompt_tokens: z.number().nonnegative().optional(),
    completion_tokens: z.number().nonnegative().optional(),
    total_tokens: z.number().nonnegative().optional(),
  })
  .nullish();

function issuePaths(error: z.ZodError): string {
  const paths = error.issues.map((i) => i.path.map(String).join('.') || '(root)');
  return [...new Set(paths)].slice(0, 5).join(', ');
}

/**
 * A chat completion body checked against `schema`. A body that is not JSON, or JSON that does not
 * fit, is `bad(message)`; the message names the wrong or missing fields, never their values.
 */
export function parseChatCompletion<S extends z.ZodType>(
  body: Buffer,
  schema: S,
  label: string,
  bad: (message: string) => TouchstoneError,
): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw bad(`${label} answered with a body that is not JSON`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw bad(
      `${label} answered with JSON that is not a chat completion (wrong or missing: ${issuePaths(parsed.error)})`,
    );
  }
  return parsed.data;
}

/** The token counts a chat completion reports, under Touchstone's names. */
export function chatUsage(u: z.output<typeof ChatUsageSchema>): Usage {
  const usage: Usage = {};
  if (u?.prompt_tokens !== undefined) usage.inputTokens = u.prompt_tokens;
  if (u?.completion_tokens !== undefined) usage.outputTokens = u.completion_tokens;
  if (u?.total_tokens !== undefined) usage.totalTokens = u.total_tokens;
  return usage;
}
