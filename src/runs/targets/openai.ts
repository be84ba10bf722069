import { z } from 'zod';
import { type Step, type Usage, withoutTrailingSlashes } from '../../core/index.js';
import { ChatUsageSchema, chatUsage, parseChatCompletion } from '../../evaluators/index.js';
import { CredentialErrors, resolveCredential } from '../../net/index.js';
import type { TargetCall, TargetDeps, TargetOutput } from './contract.js';
import { TargetErrors } from './error-codes.js';
import { asMessageList, type Backend, type ChatMessage } from './harness.js';
import { sendWithRetries, targetHttpClient } from './outbound.js';
import type { OpenAiTargetSpec } from './schema.js';

const ChatCompletionSchema = z.object({
  model: z.string().optional(),
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullish(),
          tool_calls: z
            .array(
              z.object({
                id: z.string().optional(),
                function: z.object({ name: z.string(), arguments: z.string().default('') }),
              }),
            )
            .nullish(),
        }),
      }),
    )
    .min(1),
  usage: ChatUsageSchema,
});

/** Text of an input for a `user` message: strings as they are, anything else as JSON. */
function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  return value === undefined ? '' : JSON.stringify(value);
}

/** OpenAI takes string or content-part content; anything else is sent as its JSON text. */
function wireMessage(m: ChatMessage): Record<string, unknown> {
  const content =
    typeof m.content === 'string' || Array.isArray(m.content) ? m.content : asText(m.content);
  return { role: m.role, content, ...(m.name === undefined ? {} : { name: m.name }) };
}

/**
 * `POST {baseUrl}/chat/completions`. Single-turn: a message-list input is sent as the
 * conversation, anything else as one `user` message (text as is, JSON as its text), after the
 * `systemPrompt` when set. The output is the first choice's content; the trajectory is one `llm`
 * step with the messages, the answer, any tool calls and the token usage.
 */
export function openAiBackend(
  spec: OpenAiTargetSpec,
  deps: TargetDeps,
  maxBytes: number,
  now: () => number,
): Backend {
  const base = new URL(spec.baseUrl);
  const url = `${withoutTrailingSlashes(spec.baseUrl)}/chat/completions`;
  const http = targetHttpClient(base, deps, maxBytes);
  const label = `openai-compatible target ${base.host}`;
  const baseDelayMs = deps.retryBaseDelayMs ?? 500;

  function headers(): Record<string, string> {
    const out: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
    };
    if (spec.apiKeyEnv !== undefined) {
      // Read per call so a rotated key applies to the rest of a long run.
      const key = resolveCredential({ env: spec.apiKeyEnv }, deps.env);
      if (key === undefined) {
        throw CredentialErrors.CREDENTIAL_UNREADABLE(
          `${label}: apiKeyEnv names the variable ${spec.apiKeyEnv}, which is unset or blank`,
        );
      }
      out.authorization = `Bearer ${key}`;
    }
    return out;
  }

  async function complete(
    messages: ChatMessage[],
    signal: AbortSignal,
  ): Promise<{ content: string; step: Step; usage: Usage }> {
    const wire = [
      ...(spec.systemPrompt === undefined ? [] : [{ role: 'system', content: spec.systemPrompt }]),
      ...messages.map(wireMessage),
    ];
    const start = now();
    const res = await sendWithRetries(
      http,
      {
        method: 'POST',
        url,
        headers: headers(),
        body: JSON.stringify({ ...spec.params, model: spec.model, messages: wire }),
      },
      spec.retries,
      baseDelayMs,
      label,
      signal,
    );
    const end = now();
    const answer = parseChatCompletion(
      res.body,
      ChatCompletionSchema,
      label,
      TargetErrors.TARGET_BAD_RESPONSE,
    );
    const message = answer.choices[0]?.message;
    const content = message?.content ?? '';
    const usage: Usage = { latencyMs: end - start, ...chatUsage(answer.usage) };
    const toolCalls = (message?.tool_calls ?? []).map((c) => ({
      ...(c.id === undefined ? {} : { id: c.id }),
      name: c.function.name,
      arguments: c.function.arguments,
    }));
    const step: Step = {
      type: 'llm',
      name: 'chat.completions',
      model: answer.model ?? spec.model,
      input: wire,
      output: [
        {
          role: 'assistant',
          content,
          ...(toolCalls.length === 0 ? {} : { toolCalls }),
        },
      ],
      start: new Date(start).toISOString(),
      end: new Date(end).toISOString(),
      usage,
      error: '',
    };
    return { content, step, usage };
  }

  return {
    kind: 'openai-compatible',
    concurrency: spec.concurrency ?? 8,
    label,
    async single(call: TargetCall, signal): Promise<TargetOutput> {
      const input = call.record.input;
      const messages = asMessageList(input) ?? [{ role: 'user', content: asText(input) }];
      const { content, step, usage } = await complete(messages, signal);
      return { output: content, trajectory: [step], usage };
    },
    async turn(conversation, _call, signal) {
      const { content, step, usage } = await complete([...conversation], signal);
      return { reply: content, usage, steps: [step] };
    },
    close: () => http.close(),
  };
}
