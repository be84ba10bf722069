import { z } from 'zod';
import { issuesToDetails } from '../core/index.js';
import type { GuardDecision, GuardMessage, GuardPhase, GuardSubject } from './types.js';

/**
 * The agentgateway prompt-guard webhook's wire format (docs/guardrails.md): what the gateway
 * sends on `/request` and `/response`, and the answer it parses. The gateway reads an answer's
 * `action` as Mask when `body` is an object, as Reject when `body` is a string and `status_code`
 * an integer, and as Pass otherwise, so a reject here always carries both, well typed.
 */

/** Messages (or choices) one call may carry; a chat longer than this is refused, not cut. */
export const MAX_MESSAGES = 1024;

const Message = z.looseObject({ role: z.string().max(64), content: z.string() });

/** What the gateway posts to `/request` (published in the OpenAPI document). */
export const PromptGuardRequestSchema = z.looseObject({
  body: z.looseObject({ messages: z.array(Message).min(1).max(MAX_MESSAGES) }),
});

/** What the gateway posts to `/response` (published in the OpenAPI document). */
export const PromptGuardResponseSchema = z.looseObject({
  body: z.looseObject({
    choices: z
      .array(z.looseObject({ message: Message }))
      .min(1)
      .max(MAX_MESSAGES),
  }),
});

/** Headers never handed to conditions or decision traces: the gateway's and the client's credentials. */
const WITHHELD_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization', 'x-api-key']);

/** The answer object, exactly as the gateway deserializes it. */
export type PromptGuardAnswer = {
  action:
    | { reason: string }
    | {
        body: { messages: GuardMessage[] } | { choices: { message: GuardMessage }[] };
        reason: string;
      }
    | { body: string; status_code: number; reason: string };
};

/** A call's subject, or the plain-text reason its body is not the gateway's shape. */
export function promptGuardSubject(
  phase: GuardPhase,
  body: unknown,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): GuardSubject | { invalid: string } {
  const parsed = (
    phase === 'request' ? PromptGuardRequestSchema : PromptGuardResponseSchema
  ).safeParse(body);
  if (!parsed.success) {
    const paths = [...new Set(issuesToDetails(parsed.error.issues).map((d) => d.path))];
    const expected =
      phase === 'request'
        ? 'body.messages: 1 to 1024 {role, content} strings'
        : 'body.choices: 1 to 1024 {message: {role, content}} strings';
    return {
      invalid: `not a prompt-guard ${phase} (wrong or missing: ${paths.slice(0, 5).join(', ')}; expected ${expected})`,
    };
  }
  const messages =
    'messages' in parsed.data.body
      ? (parsed.data.body.messages as GuardMessage[])
      : (parsed.data.body.choices as { message: GuardMessage }[]).map((c) => c.message);
  return {
    phase,
    messages: messages.map((m) => ({ role: m.role, content: m.content })),
    headers: forwardedHeaders(headers),
  };
}

function forwardedHeaders(
  headers: Readonly<Record<string, string | string[] | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || WITHHELD_HEADERS.has(name)) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The decision as the gateway's answer: Pass, Mask (same count of messages or choices), Reject. */
export function promptGuardAnswer(phase: GuardPhase, decision: GuardDecision): PromptGuardAnswer {
  switch (decision.action) {
    case 'allow':
      return { action: { reason: decision.reason } };
    case 'mask': {
      const messages = decision.messages.map((m) => ({ role: m.role, content: m.content }));
      const body =
        phase === 'request' ? { messages } : { choices: messages.map((message) => ({ message })) };
      return { action: { body, reason: decision.reason } };
    }
    case 'reject':
      return rejectAnswer(decision.status, decision.message, decision.reason);
  }
}

/** A reject the gateway cannot misread: a string body and an integer status in 100–999. */
export function rejectAnswer(status: number, message: string, reason: string): PromptGuardAnswer {
  const code = Number.isInteger(status) && status >= 100 && status <= 999 ? status : 503;
  return { action: { body: message, status_code: code, reason } };
}
