import type { Message, Span } from '../../core/index.js';
import { genAiMessages } from './gen-ai.js';
import { isEmptyMessage, readMessages } from './messages.js';
import type { ConventionReader, MessagesReading } from './reader.js';
import {
  asNumber,
  attrNumber,
  isObject,
  type JsonObject,
  jsonSafe,
  nanos,
  parsePythonLiteral,
  sniffJson,
  tryParse,
} from './values.js';

/**
 * Deprecated OTel GenAI forms still on the wire (conventions reference §2): per-message span
 * events (`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
 * `gen_ai.tool.message`, `gen_ai.choice`), the `gen_ai.client.inference.operation.details` event,
 * the older `gen_ai.content.prompt` / `gen_ai.content.completion` events, and the
 * `gen_ai.usage.prompt_tokens` / `completion_tokens` names. Logfire's `events` attribute holds the
 * same event dicts and is read through `messagesFromEvents` too.
 */

const MESSAGE_EVENTS: Record<string, string> = {
  'gen_ai.system.message': 'system',
  'gen_ai.user.message': 'user',
  'gen_ai.assistant.message': 'assistant',
  'gen_ai.tool.message': 'tool',
};
const CHOICE = 'gen_ai.choice';
const DETAILS = 'gen_ai.client.inference.operation.details';
const PROMPT = 'gen_ai.content.prompt';
const COMPLETION = 'gen_ai.content.completion';
const EVENT_NAMES = new Set([...Object.keys(MESSAGE_EVENTS), CHOICE, DETAILS, PROMPT, COMPLETION]);

export interface EventLike {
  name: string;
  /** Nanosecond string; events without a time keep arrival order. */
  time?: string;
  body: JsonObject;
}

function value(v: unknown): unknown {
  return typeof v === 'string' ? sniffJson(v) : jsonSafe(v);
}

/**
 * An event body in the OpenAI-like shape `readMessages` knows; none when it holds nothing (events
 * sent without content capture, a model's empty reply).
 */
function bodyMessage(role: string, body: JsonObject): Message[] | undefined {
  const shaped: JsonObject = { role: typeof body.role === 'string' ? body.role : role };
  const content = body.content;
  if (content !== undefined)
    shaped.content = typeof content === 'string' ? content : value(content);
  if (body.tool_calls !== undefined) shaped.tool_calls = value(body.tool_calls);
  const id = body.id ?? body.tool_call_id;
  if (role === 'tool' && id !== undefined) shaped.tool_call_id = id;
  const messages = readMessages(shaped)?.filter((m) => !isEmptyMessage(m));
  return messages && messages.length > 0 ? messages : undefined;
}

/** A serialized message list of `gen_ai.prompt` / `gen_ai.completion` (JSON or Python repr). */
function serialized(text: unknown, role: string): Message[] | undefined {
  if (typeof text !== 'string') return readMessages(value(text));
  const parsed = tryParse(text.trim());
  const literal = parsed.ok ? parsed : parsePythonLiteral(text);
  if (literal.ok) {
    const messages = readMessages(literal.value);
    if (messages) return messages;
  }
  return text ? [{ role, content: text }] : undefined;
}

/** Messages from GenAI event dicts, ordered by time then arrival (choices by index). */
export function messagesFromEvents(events: readonly EventLike[]): MessagesReading | undefined {
  const ordered = events
    .map((e, i) => ({ e, i, t: e.time ? (nanos(e.time) ?? 0n) : 0n }))
    .sort((a, b) => (a.t === b.t ? a.i - b.i : a.t < b.t ? -1 : 1))
    .map((x) => x.e);
  const input: Message[] = [];
  const choices: Array<{ index: number; order: number; messages: Message[] }> = [];
  for (const event of ordered) {
    const body = event.body;
    const role = MESSAGE_EVENTS[event.name];
    if (role) {
      const m = bodyMessage(role, body);
      if (m) input.push(...m);
    } else if (event.name === CHOICE) {
      const message = value(body.message);
      const inner = isObject(message) ? message : body;
      const m = bodyMessage('assistant', inner);
      if (m) {
        const index = asNumber(body.index) ?? choices.length;
        choices.push({ index, order: choices.length, messages: m });
      }
    } else if (event.name === DETAILS) {
      const details = genAiMessages(body as Span['attributes']);
      if (details?.input) input.push(...details.input);
      if (details?.output)
        choices.push({ index: -1, order: choices.length, messages: details.output });
    } else if (event.name === PROMPT) {
      const m = serialized(body['gen_ai.prompt'], 'user');
      if (m) input.push(...m);
    } else if (event.name === COMPLETION) {
      const m = serialized(body['gen_ai.completion'], 'assistant');
      if (m) choices.push({ index: choices.length, order: choices.length, messages: m });
    }
  }
  choices.sort((a, b) => a.index - b.index || a.order - b.order);
  const out: MessagesReading = {};
  if (input.length > 0) out.input = input;
  const output = choices.flatMap((c) => c.messages);
  if (output.length > 0) out.output = output;
  return out.input || out.output ? out : undefined;
}

function spanEvents(span: Span): EventLike[] {
  return span.events
    .filter((e) => EVENT_NAMES.has(e.name))
    .map((e) => ({ name: e.name, time: e.timeUnixNano, body: e.attributes as JsonObject }));
}

export const genAiLegacy: ConventionReader = {
  name: 'gen-ai-legacy',
  reads: {
    keys: [
      'gen_ai.usage.prompt_tokens',
      'gen_ai.usage.completion_tokens',
      'gen_ai.system',
      'gen_ai.provider.name',
    ],
    prefixes: [],
    // The messages are span events.
    without: (span) => {
      for (const e of span.events) if (EVENT_NAMES.has(e.name)) return true;
      return false;
    },
  },

  detect(span) {
    const a = span.attributes;
    return (
      'gen_ai.usage.prompt_tokens' in a ||
      ('gen_ai.system' in a && !('gen_ai.provider.name' in a)) ||
      span.events.some((e) => EVENT_NAMES.has(e.name))
    );
  },

  impliedType(span) {
    return span.events.some((e) => EVENT_NAMES.has(e.name)) ? 'llm' : undefined;
  },

  messages(span) {
    const events = spanEvents(span);
    return events.length > 0 ? messagesFromEvents(events) : undefined;
  },

  usage(span) {
    const u = {
      inputTokens: attrNumber(span, 'gen_ai.usage.prompt_tokens'),
      outputTokens: attrNumber(span, 'gen_ai.usage.completion_tokens'),
    };
    return u.inputTokens !== undefined || u.outputTokens !== undefined ? u : undefined;
  },
};
