import type { Message, Span, ToolCall } from '../../core/index.js';
import { readMessages } from './messages.js';
import type { ConventionReader, IoReading, MessagesReading, ToolCallReading } from './reader.js';
import { attributeLabels, usageReading } from './reader.js';
import {
  asCount,
  asString,
  attrString,
  isObject,
  jsonAttr,
  parseAnyJson,
  rawArguments,
} from './values.js';

/**
 * Vercel AI SDK legacy `ai.*` spans (conventions reference §6.1–6.4): `ai.operationId`,
 * `ai.prompt` / `ai.prompt.messages`, `ai.response.text` / `toolCalls` / `object`, `ai.toolCall.*`,
 * `ai.usage.*` in both spellings, `ai.model.*`, `ai.telemetry.*`. The v7 GenAI format is plain
 * OTel GenAI (gen-ai.ts).
 */

const OUTER = new Set(['ai.generateText', 'ai.streamText', 'ai.generateObject', 'ai.streamObject']);
const EMBED_OUTER = new Set(['ai.embed', 'ai.embedMany']);
const META = 'ai.telemetry.metadata.';

/** `ai.operationId`, else the operation part of `operation.name` ("{operationId} {functionId}"). */
function vercelOperation(span: Span): string | undefined {
  const id = attrString(span, 'ai.operationId');
  if (id) return id;
  const name = attrString(span, 'operation.name');
  if (name?.startsWith('ai.')) return name.split(' ')[0];
  return undefined;
}

function isModelCall(op: string | undefined): boolean {
  return !!op && (op.endsWith('.doGenerate') || op.endsWith('.doStream'));
}

/** `ai.prompt` = `{system?, prompt?, messages?}`: the caller-level input. */
function promptInput(span: Span): { system?: string; messages?: Message[]; text?: string } {
  const prompt = jsonAttr(span, 'ai.prompt');
  if (typeof prompt === 'string') return { text: prompt };
  if (!isObject(prompt)) return {};
  const out: { system?: string; messages?: Message[]; text?: string } = {};
  const system = asString(prompt.system);
  if (system) out.system = system;
  if (typeof prompt.prompt === 'string') out.text = prompt.prompt;
  const list = Array.isArray(prompt.messages)
    ? prompt.messages
    : Array.isArray(prompt.prompt)
      ? prompt.prompt
      : undefined;
  if (list) out.messages = readMessages(list);
  return out;
}

function responseToolCalls(span: Span): ToolCall[] {
  const list = jsonAttr(span, 'ai.response.toolCalls') ?? jsonAttr(span, 'ai.result.toolCalls');
  if (!Array.isArray(list)) return [];
  const out: ToolCall[] = [];
  for (const c of list) {
    if (!isObject(c)) continue;
    const name = asString(c.toolName);
    if (!name) continue;
    const call: ToolCall = { name, arguments: rawArguments(c.input ?? c.args) ?? '' };
    const id = asString(c.toolCallId)?.trim();
    if (id) call.id = id;
    out.push(call);
  }
  return out;
}

function responseText(span: Span): string | undefined {
  const v = span.attributes['ai.response.text'] ?? span.attributes['ai.result.text'];
  return typeof v === 'string' ? v : undefined;
}

function responseObject(span: Span): unknown {
  return jsonAttr(span, 'ai.response.object') ?? jsonAttr(span, 'ai.result.object');
}

export const vercelAi: ConventionReader = {
  name: 'vercel-ai',
  // The SDK's own tracer scope marks its spans even without an operation id.
  reads: {
    keys: ['operation.name'],
    prefixes: ['ai.'],
    without: (span) => span.scope.name === 'ai',
  },

  detect(span) {
    return vercelOperation(span) !== undefined || span.scope.name === 'ai';
  },

  stepType(span, ctx) {
    const op = vercelOperation(span);
    if (!op) return undefined;
    if (op === 'ai.toolCall') return { type: 'tool' };
    if (isModelCall(op)) return { type: 'llm' };
    if (op.endsWith('.doEmbed')) return { type: 'embedding' };
    if (OUTER.has(op)) {
      // The whole call: an agent loop when it has model-call children, else the model call.
      const loop = ctx.descendants().some((d) => isModelCall(vercelOperation(d)));
      return { type: loop ? 'agent' : 'llm' };
    }
    if (EMBED_OUTER.has(op)) {
      const inner = ctx.descendants().some((d) => vercelOperation(d)?.endsWith('.doEmbed'));
      return { type: inner ? 'generic' : 'embedding' };
    }
    return { type: 'generic' };
  },

  impliedType(span) {
    if ('ai.toolCall.name' in span.attributes) return 'tool';
    return undefined;
  },

  stepName(span, type) {
    if (type === 'tool') return attrString(span, 'ai.toolCall.name');
    if (type === 'agent') return attrString(span, 'ai.telemetry.functionId');
    return undefined;
  },

  model(span) {
    const response = attrString(span, 'ai.response.model');
    const request = attrString(span, 'ai.model.id');
    return response || request ? { response, request } : undefined;
  },

  messages(span) {
    const out: MessagesReading = {};
    const prompt = jsonAttr(span, 'ai.prompt.messages');
    const input = readMessages(prompt);
    if (input) out.input = input;
    else {
      const p = promptInput(span);
      const list: Message[] = [];
      if (p.system) list.push({ role: 'system', content: p.system });
      if (p.messages) list.push(...p.messages);
      else if (p.text !== undefined) list.push({ role: 'user', content: p.text });
      if (list.length > 0) out.input = list;
    }
    const text = responseText(span);
    const object = responseObject(span);
    const calls = responseToolCalls(span);
    if (text !== undefined || object !== undefined || calls.length > 0) {
      const m: Message = { role: 'assistant' };
      if (text !== undefined && text !== '') m.content = text;
      else if (object !== undefined) m.content = object;
      if (calls.length > 0) m.toolCalls = calls;
      out.output = [m];
    }
    return out.input || out.output ? out : undefined;
  },

  toolCall(span) {
    const a = span.attributes;
    const out: ToolCallReading = {};
    const name = attrString(span, 'ai.toolCall.name');
    if (name) out.name = name;
    const id = attrString(span, 'ai.toolCall.id')?.trim();
    if (id) out.id = id;
    const args = a['ai.toolCall.args'] ?? a['ai.toolCall.input'];
    if (args !== undefined) out.arguments = rawArguments(args);
    const result = a['ai.toolCall.result'] ?? a['ai.toolCall.output'];
    if (result !== undefined) {
      out.result =
        typeof result === 'string' ? parseAnyJson(result) : jsonAttr(span, 'ai.toolCall.result');
      out.resultPresent = true;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  },

  io(span, type) {
    const out: IoReading = {};
    if (type === 'embedding') {
      const v = jsonAttr(span, 'ai.value') ?? jsonAttr(span, 'ai.values');
      if (v !== undefined) out.input = v;
      return out.input !== undefined ? out : undefined;
    }
    const p = promptInput(span);
    if (p.messages) out.input = p.messages;
    else if (p.text !== undefined) out.input = p.text;
    const text = responseText(span);
    const object = responseObject(span);
    if (text !== undefined && text !== '') out.output = text;
    else if (object !== undefined) out.output = object;
    return out.input !== undefined || out.output !== undefined ? out : undefined;
  },

  usage(span) {
    const a = span.attributes;
    const u = {
      inputTokens: asCount(
        a['ai.usage.inputTokens'] ?? a['ai.usage.promptTokens'] ?? a['ai.usage.tokens'],
      ),
      outputTokens: asCount(a['ai.usage.outputTokens'] ?? a['ai.usage.completionTokens']),
      totalTokens: asCount(a['ai.usage.totalTokens']),
    };
    return usageReading(u);
  },

  session(span) {
    return attrString(span, `${META}sessionId`);
  },

  user(span) {
    return attrString(span, `${META}userId`);
  },

  labels(span) {
    return attributeLabels(span.attributes, META);
  },
};
