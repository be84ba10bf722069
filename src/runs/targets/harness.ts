import type { Step, Usage } from '../../core/index.js';
import type { Target, TargetCall, TargetOutput } from './contract.js';
import { withDeadline } from './deadline.js';
import { TargetErrors } from './error-codes.js';
import type { Harness, TargetSpec } from './schema.js';

/** A chat message as the `chat` harness replays it and as targets receive it. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  name?: string;
}

export interface TurnResult {
  reply: unknown;
  usage?: Usage;
  /** Steps the target reported for this turn (a `command` target in `record` mode). */
  steps?: Step[];
}

/** One target kind: how it answers a single-turn call and one chat turn. */
export interface Backend {
  readonly kind: TargetSpec['kind'];
  readonly concurrency: number;
  /** `what` in timeout messages: `openai-compatible target`. */
  readonly label: string;
  single(call: TargetCall, signal: AbortSignal): Promise<TargetOutput>;
  turn(
    conversation: readonly ChatMessage[],
    call: TargetCall,
    signal: AbortSignal,
  ): Promise<TurnResult>;
  close(): Promise<void>;
}

/** A list of `{role, content}` objects, the shape the `chat` harness and OpenAI messages share. */
export function asMessageList(value: unknown): ChatMessage[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  for (const m of value) {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) return undefined;
    if (typeof (m as { role?: unknown }).role !== 'string') return undefined;
  }
  return value as ChatMessage[];
}

export function addUsage(a: Usage | undefined, b: Usage | undefined): Usage | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  const out: Usage = {};
  for (const key of [
    'inputTokens',
    'outputTokens',
    'totalTokens',
    'costUsd',
    'latencyMs',
  ] as const) {
    if (a[key] !== undefined || b[key] !== undefined) out[key] = (a[key] ?? 0) + (b[key] ?? 0);
  }
  return out;
}

/** Roles replayed from the recording; the target's own replies replace recorded `assistant` turns. */
const REPLAYED_ROLES = new Set(['system', 'developer', 'user']);

/**
 * Wraps a backend in a harness. `single-turn` makes one call per record and trial. `chat` needs a
 * message list as the record's input: it walks it in order, keeps `system`/`developer`/`user`
 * messages, drops the recorded `assistant` and `tool` messages, and after every `user` message
 * calls the target with the conversation so far, appending the reply as an `assistant` message.
 * The output is the last reply; the trajectory holds one step per turn. Each call (or each turn)
 * gets its own deadline.
 */
export function harnessTarget(
  backend: Backend,
  harness: Harness,
  timeoutMs: number,
  now: () => number,
): Target {
  let closed: Promise<void> | undefined;
  return {
    kind: backend.kind,
    concurrency: backend.concurrency,
    async generate(call, signal) {
      if (harness === 'single-turn') {
        return withDeadline(timeoutMs, signal, backend.label, (s) => backend.single(call, s));
      }
      const script = asMessageList(call.record.input);
      if (script === undefined || !script.some((m) => m.role === 'user')) {
        throw TargetErrors.TARGET_INPUT_INVALID(
          'the chat harness needs the record input to be a list of {role, content} messages with at least one user message',
        );
      }
      const conversation: ChatMessage[] = [];
      const trajectory: Step[] = [];
      let usage: Usage | undefined;
      let reply: unknown;
      let turn = 0;
      for (const message of script) {
        if (!REPLAYED_ROLES.has(message.role)) continue;
        conversation.push(message);
        if (message.role !== 'user') continue;
        turn += 1;
        const start = now();
        const result = await withDeadline(
          timeoutMs,
          signal,
          `${backend.label} (chat turn ${turn})`,
          (s) => backend.turn([...conversation], call, s),
        );
        const end = now();
        reply = result.reply;
        usage = addUsage(usage, result.usage);
        if (result.steps !== undefined && result.steps.length > 0) {
          trajectory.push(...result.steps);
        } else {
          trajectory.push({
            type: backend.kind === 'openai-compatible' ? 'llm' : 'agent',
            name: `turn ${turn}`,
            input: [...conversation],
            output: reply,
            start: new Date(start).toISOString(),
            end: new Date(end).toISOString(),
            ...(result.usage === undefined ? {} : { usage: result.usage }),
            error: '',
          });
        }
        conversation.push({
          role: 'assistant',
          content: typeof reply === 'string' ? reply : JSON.stringify(reply),
        });
      }
      return {
        output: reply,
        trajectory,
        ...(usage === undefined ? {} : { usage }),
      };
    },
    close() {
      closed ??= backend.close();
      return closed;
    },
  };
}
