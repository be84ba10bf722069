import type { Message, ToolCall } from '../../core/index.js';
import { asString, isObject, type JsonObject, rawArguments, sniffJson } from './values.js';

/**
 * Chat messages of every dialect met on spans, read into the Record's message form
 * `{role, content, toolCalls?: [{id?, name, arguments}], toolCallId?, name?}`:
 * OTel GenAI parts (and Gemini parts), OpenAI chat and Responses items, Anthropic content blocks,
 * Vercel AI SDK prompt parts and LangChain messages (dumps, `message_to_dict`, `lc` constructors
 * and `(role, text)` tuples).
 *
 * Rules: text parts join into a string `content`; tool calls keep their arguments as the raw
 * string (objects are serialized); each tool result becomes its own `tool` message with its
 * `toolCallId`, whatever role carried it (Pydantic AI sends results as `user` messages); reasoning
 * parts are left out of `content` (they stay in the raw attributes); other parts (images, files)
 * make `content` a list of parts.
 */

const LANGCHAIN_ROLES: Record<string, string> = {
  human: 'user',
  humanmessage: 'user',
  humanmessagechunk: 'user',
  ai: 'assistant',
  aimessage: 'assistant',
  aimessagechunk: 'assistant',
  system: 'system',
  systemmessage: 'system',
  systemmessagechunk: 'system',
  tool: 'tool',
  toolmessage: 'tool',
  toolmessagechunk: 'tool',
  function: 'tool',
  functionmessage: 'tool',
  chat: 'chat',
  chatmessage: 'chat',
};

const TUPLE_ROLES: Record<string, string> = {
  user: 'user',
  human: 'user',
  assistant: 'assistant',
  ai: 'assistant',
  system: 'system',
  tool: 'tool',
  developer: 'developer',
};

/** The parts of one message by kind; a list is made only for a kind the message has. */
interface Blocks {
  text: string[] | undefined;
  others: unknown[] | undefined;
  toolCalls: ToolCall[] | undefined;
  results: Message[] | undefined;
}

/** A list with one more item: made on the first one. */
function add<T>(list: T[] | undefined, item: T): T[] {
  if (list === undefined) return [item];
  list.push(item);
  return list;
}

function addAll<T>(list: T[] | undefined, items: readonly T[]): T[] | undefined {
  if (items.length === 0) return list;
  if (list === undefined) return [...items];
  list.push(...items);
  return list;
}

function toolCall(id: unknown, name: unknown, args: unknown): ToolCall | undefined {
  const n = asString(name);
  if (n === undefined) return undefined;
  const call: ToolCall = { name: n, arguments: rawArguments(args) ?? '' };
  const i = asString(id)?.trim();
  if (i) call.id = i;
  return call;
}

function toolResult(id: unknown, content: unknown, name?: unknown): Message {
  const m: Message = { role: 'tool', content: sniffJson(content) };
  const i = asString(id)?.trim();
  if (i) m.toolCallId = i;
  const n = asString(name);
  if (n) m.name = n;
  return m;
}

/** Vercel v5+ tool output `{type: 'json' | 'text' | 'error-text' | …, value}`. */
function vercelOutput(part: JsonObject): unknown {
  const output = part.output;
  if (isObject(output) && typeof output.type === 'string' && 'value' in output) return output.value;
  return output ?? part.result;
}

/** OpenAI-style `tool_calls` list: `[{id, type: 'function', function: {name, arguments}}]`. */
function openAiToolCalls(list: unknown): ToolCall[] {
  if (!Array.isArray(list)) return [];
  const out: ToolCall[] = [];
  for (const item of list) {
    if (!isObject(item)) continue;
    const fn = isObject(item.function) ? item.function : undefined;
    const call = fn
      ? toolCall(item.id, fn.name, fn.arguments)
      : // LangChain `{name, args, id}` and GenAI-like `{name, arguments, id}` lists.
        toolCall(item.id, item.name, item.args ?? item.arguments ?? item.input);
    if (call) out.push(call);
  }
  return out;
}

function readBlocks(content: unknown): Blocks {
  const blocks: Blocks = {
    text: undefined,
    others: undefined,
    toolCalls: undefined,
    results: undefined,
  };
  const list = Array.isArray(content) ? content : [content];
  for (const part of list) {
    if (typeof part === 'string') {
      blocks.text = add(blocks.text, part);
      continue;
    }
    if (!isObject(part)) continue;
    const type = typeof part.type === 'string' ? part.type : undefined;
    switch (type) {
      case 'text':
      case 'input_text':
      case 'output_text': {
        const text = asString(part.text) ?? asString(part.content);
        if (text !== undefined) blocks.text = add(blocks.text, text);
        else if (part.text === '' || part.content === '') blocks.text = add(blocks.text, '');
        break;
      }
      case 'tool_call':
      case 'tool_use':
      case 'function_call':
      case 'tool-call': {
        const call = toolCall(
          part.id ?? part.toolCallId ?? part.call_id,
          part.name ?? part.toolName,
          part.arguments ?? part.input ?? part.args,
        );
        if (call) blocks.toolCalls = add(blocks.toolCalls, call);
        break;
      }
      case 'tool_call_response':
      case 'function_call_output':
        blocks.results = add(
          blocks.results,
          toolResult(
            part.id ?? part.call_id,
            part.response ?? part.result ?? part.output,
            part.name,
          ),
        );
        break;
      case 'tool_result':
        blocks.results = add(
          blocks.results,
          toolResult(part.tool_use_id ?? part.id, toolResultContent(part.content)),
        );
        break;
      case 'tool-result':
        blocks.results = add(
          blocks.results,
          toolResult(part.toolCallId, vercelOutput(part), part.toolName),
        );
        break;
      case 'reasoning':
      case 'thinking':
      case 'redacted_thinking':
        break;
      case undefined: {
        // Gemini parts and untyped text objects.
        const fc = part.function_call ?? part.functionCall;
        const fr = part.function_response ?? part.functionResponse;
        if (isObject(fc)) {
          const call = toolCall(fc.id, fc.name, fc.args ?? fc.arguments);
          if (call) blocks.toolCalls = add(blocks.toolCalls, call);
        } else if (isObject(fr)) {
          blocks.results = add(blocks.results, toolResult(fr.id, fr.response, fr.name));
        } else if (typeof part.text === 'string') {
          if (part.thought !== true) blocks.text = add(blocks.text, part.text);
        } else blocks.others = add(blocks.others, part);
        break;
      }
      default:
        blocks.others = add(blocks.others, part);
    }
  }
  return blocks;
}

/** Anthropic tool_result content: a string or text blocks. */
function toolResultContent(content: unknown): unknown {
  if (Array.isArray(content) && content.every((b) => isObject(b) && b.type === 'text')) {
    return content.map((b) => String((b as JsonObject).text ?? '')).join('');
  }
  return content;
}

function build(role: string, blocks: Blocks, extra: Partial<Message>): Message[] {
  // The results list is this message's own: the built messages are added to it.
  const out: Message[] = blocks.results ?? [];
  const text = blocks.text;
  const calls = blocks.toolCalls;
  const hasText = text !== undefined && text.length > 0;
  const hasOther = blocks.others !== undefined && blocks.others.length > 0;
  const hasCalls = calls !== undefined && calls.length > 0;
  if (!hasText && !hasOther && !hasCalls && out.length > 0) return out;
  const m: Message = { role };
  if (hasOther) {
    m.content = [...(text ?? []).map((t) => ({ type: 'text', text: t })), ...(blocks.others ?? [])];
  } else if (hasText) {
    const joined = text.length === 1 ? (text[0] as string) : text.join('');
    // An empty text next to tool calls is the "no text" of a tool-calling turn.
    if (joined !== '' || !hasCalls) m.content = joined;
  }
  if (hasCalls) m.toolCalls = calls;
  if (extra.name) m.name = extra.name;
  if (extra.toolCallId) m.toolCallId = extra.toolCallId;
  if (role === 'tool' && typeof m.content === 'string') m.content = sniffJson(m.content);
  out.push(m);
  return out;
}

/** One message of any known dialect, or undefined when the value is not a message. */
function readMessage(value: unknown): Message[] | undefined {
  // LangChain `(role, text)` tuple.
  if (Array.isArray(value)) {
    if (value.length === 2 && typeof value[0] === 'string') {
      const role = TUPLE_ROLES[value[0].toLowerCase()];
      if (role) return build(role, readBlocks(value[1]), {});
    }
    return undefined;
  }
  if (!isObject(value)) return undefined;

  // LangChain `lc` constructor form.
  if (value.lc !== undefined && value.type === 'constructor' && Array.isArray(value.id)) {
    const cls = String(value.id[value.id.length - 1] ?? '').toLowerCase();
    const role = LANGCHAIN_ROLES[cls];
    if (!role || !isObject(value.kwargs)) return undefined;
    return langChain(role, value.kwargs);
  }

  // LangChain `message_to_dict`: {type, data}.
  if (typeof value.type === 'string' && isObject(value.data) && !('role' in value)) {
    const role = LANGCHAIN_ROLES[value.type.toLowerCase()];
    if (role) return langChain(role, value.data);
  }

  if (typeof value.role === 'string') {
    const role = value.role === 'model' ? 'assistant' : value.role;
    // GenAI (and Gemini) parts.
    if (Array.isArray(value.parts)) {
      return build(role, readBlocks(value.parts), { name: asString(value.name) });
    }
    const content = value.content;
    // A JSON object as the content (a structured tool result) is the content, not a part.
    const whole = isObject(content) && typeof content.type !== 'string';
    const blocks = readBlocks(whole || content === null || content === undefined ? [] : content);
    blocks.toolCalls = addAll(blocks.toolCalls, openAiToolCalls(value.tool_calls));
    if (isObject(value.function_call)) {
      const call = toolCall(undefined, value.function_call.name, value.function_call.arguments);
      if (call) blocks.toolCalls = add(blocks.toolCalls, call);
    }
    const toolCallId = asString(value.tool_call_id)?.trim() ?? asString(value.toolCallId)?.trim();
    const out = build(role, blocks, { name: asString(value.name), toolCallId });
    const last = out[out.length - 1];
    if (whole && last) last.content = content;
    return out;
  }

  // LangChain message dump: {type: 'human' | 'ai' | …, content, …}.
  if (typeof value.type === 'string' && 'content' in value) {
    const role = LANGCHAIN_ROLES[value.type.toLowerCase()];
    if (role) return langChain(role, value);
  }
  return undefined;
}

function langChain(role: string, data: JsonObject): Message[] {
  const r = role === 'chat' ? (asString(data.role) ?? 'user') : role;
  const blocks = readBlocks(data.content ?? []);
  if (data.content === null || data.content === undefined) blocks.text = undefined;
  const calls = openAiToolCalls(data.tool_calls);
  const extra = isObject(data.additional_kwargs) ? data.additional_kwargs : undefined;
  if (calls.length === 0 && extra) calls.push(...openAiToolCalls(extra.tool_calls));
  blocks.toolCalls = addAll(blocks.toolCalls, calls);
  return build(r, blocks, {
    name: asString(data.name),
    toolCallId: asString(data.tool_call_id)?.trim(),
  });
}

/**
 * A message list (or one message) of any known dialect, or undefined when some element is not a
 * message: callers use this both to read documented message attributes and to sniff whether an
 * opaque input/output is a chat transcript.
 */
export function readMessages(value: unknown): Message[] | undefined {
  const list = Array.isArray(value) && !isTuple(value) ? value : [value];
  if (list.length === 0) return undefined;
  const out: Message[] = [];
  for (const item of list) {
    const messages = readMessage(item);
    if (!messages) return undefined;
    out.push(...messages);
  }
  return out.length > 0 ? out : undefined;
}

function isTuple(value: unknown[]): boolean {
  return (
    value.length === 2 && typeof value[0] === 'string' && !!TUPLE_ROLES[value[0].toLowerCase()]
  );
}

/** Parts of one GenAI message (`gen_ai.system_instructions` is a list of parts without a role). */
export function messagesFromParts(role: string, parts: unknown): Message[] {
  if (typeof parts === 'string') return [{ role, content: parts }];
  return build(role, readBlocks(parts), {});
}

/**
 * A message with nothing in it: no tool call and no content, or only blank text (a model's empty
 * reply; an event sent without content capture).
 */
export function isEmptyMessage(m: Message): boolean {
  if (m.toolCalls !== undefined && m.toolCalls.length > 0) return false;
  const c = m.content;
  if (c === undefined || c === null) return true;
  if (typeof c === 'string') return c.trim() === '';
  return Array.isArray(c) && c.length === 0;
}
