import type { Message, Span, StepType } from '../../core/index.js';
import { type EventLike, messagesFromEvents } from './gen-ai-legacy.js';
import { readMessages } from './messages.js';
import { requestMessages, responseMessages } from './payloads.js';
import type { ConventionReader, IoReading, MessagesReading, ToolCallReading } from './reader.js';
import { usageReading } from './reader.js';
import {
  asCount,
  asString,
  attrString,
  firstString,
  isObject,
  type JsonObject,
  jsonAttr,
  rawArguments,
  sniffJson,
} from './values.js';

/**
 * Pydantic AI and Logfire specifics (conventions reference §9.2–9.3), read after the GenAI
 * attributes they also write: `logfire.msg` (the rendered span name; the span name is a message
 * template), `request_data` / `response_data`, the `events` attribute of GenAI event dicts,
 * `pydantic_ai.all_messages` / `final_result`, `tool_arguments` / `tool_response`,
 * `operation.cost`, and the OpenAI Agents integration's `Function:` / `Guardrail` / `Handoff:`
 * spans.
 */

function template(span: Span): string {
  return attrString(span, 'logfire.msg_template') ?? span.name;
}

function eventList(span: Span, key: string): EventLike[] | undefined {
  const list = jsonAttr(span, key);
  if (!Array.isArray(list)) return undefined;
  const out: EventLike[] = [];
  for (const item of list) {
    if (!isObject(item)) continue;
    const name = asString(item['event.name']);
    if (name) out.push({ name, body: item });
  }
  return out.length > 0 ? out : undefined;
}

function allMessages(span: Span): Message[] | undefined {
  return readMessages(jsonAttr(span, 'pydantic_ai.all_messages'));
}

/** Span names that are Logfire message templates of a kind (`impliedType`). */
const TEMPLATE_KINDS = ['Guardrail ', 'Function: ', 'Agent run: '];

export const logfire: ConventionReader = {
  name: 'logfire',
  reads: {
    // Pydantic AI and Logfire write undotted keys; the OpenAI Agents integration `input` /
    // `output` on its `Function:` spans.
    keys: [
      'logfire.msg',
      'logfire.msg_template',
      'logfire.span_type',
      'pydantic_ai.all_messages',
      'request_data',
      'response_data',
      'events',
      'all_messages_events',
      'tool_arguments',
      'tool_response',
      'name',
      'agent_name',
      'input',
      'output',
      'triggered',
      'from_agent',
      'to_agent',
      'final_result',
      'operation.cost',
    ],
    prefixes: [],
    // Without a template attribute the span name is the template; the tracer scope marks spans.
    without: (span) =>
      span.scope.name === 'pydantic-ai' ||
      span.scope.name === 'logfire' ||
      TEMPLATE_KINDS.some((t) => span.name.startsWith(t)),
  },

  detect(span) {
    const a = span.attributes;
    return (
      'logfire.msg' in a ||
      'logfire.span_type' in a ||
      'pydantic_ai.all_messages' in a ||
      'request_data' in a ||
      'tool_arguments' in a ||
      span.scope.name === 'pydantic-ai' ||
      span.scope.name === 'logfire'
    );
  },

  impliedType(span): StepType | undefined {
    const a = span.attributes;
    if ('tool_arguments' in a) return 'tool';
    if ('request_data' in a || eventList(span, 'events')) return 'llm';
    const t = template(span);
    // TEMPLATE_KINDS, in this order.
    if (t.startsWith('Guardrail ')) return 'guardrail';
    if (t.startsWith('Function: ')) return 'tool';
    if (t.startsWith('Agent run: ')) return 'agent';
    return undefined;
  },

  stepName(span, type) {
    if (type === 'tool' || type === 'agent' || type === 'guardrail') {
      const name = firstString(span, ['name', 'agent_name']);
      if (name) return name;
    }
    return attrString(span, 'logfire.msg');
  },

  model(span) {
    const request = jsonAttr(span, 'request_data');
    const model = isObject(request) ? asString(request.model) : undefined;
    return model ? { request: model } : undefined;
  },

  messages(span) {
    const events = eventList(span, 'events') ?? eventList(span, 'all_messages_events');
    if (events) {
      const m = messagesFromEvents(events);
      if (m) return m;
    }
    const out: MessagesReading = {};
    const request = requestMessages(jsonAttr(span, 'request_data'));
    const responseData = jsonAttr(span, 'response_data');
    const response = isObject(responseData)
      ? responseMessages(responseData.message ?? responseData)
      : undefined;
    if (request) out.input = request;
    if (response) out.output = response;
    return out.input || out.output ? out : undefined;
  },

  toolCall(span) {
    const a = span.attributes;
    const out: ToolCallReading = {};
    const functionSpan = template(span).startsWith('Function: ');
    const name = functionSpan ? attrString(span, 'name') : undefined;
    if (name) out.name = name;
    const args = a.tool_arguments ?? (functionSpan ? a.input : undefined);
    if (args !== undefined) out.arguments = rawArguments(args);
    const result = a.tool_response ?? (functionSpan ? a.output : undefined);
    if (result !== undefined) {
      out.result = typeof result === 'string' ? sniffJson(result) : jsonAttr(span, 'tool_response');
      out.resultPresent = true;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  },

  io(span, type) {
    const a = span.attributes;
    if (type === 'guardrail' && 'triggered' in a) return { output: { triggered: a.triggered } };
    if (type === 'handoff') {
      const from = attrString(span, 'from_agent');
      const to = attrString(span, 'to_agent');
      if (from || to) return { input: from, output: to };
    }
    const out: IoReading = {};
    const messages = allMessages(span);
    if (messages) {
      const firstAnswer = messages.findIndex((m) => m.role === 'assistant');
      const input = firstAnswer < 0 ? messages : messages.slice(0, firstAnswer);
      if (input.length > 0) out.input = input;
    }
    const final = a.final_result;
    if (final !== undefined)
      out.output = typeof final === 'string' ? sniffJson(final) : jsonAttr(span, 'final_result');
    return out.input !== undefined || out.output !== undefined ? out : undefined;
  },

  usage(span) {
    const response = jsonAttr(span, 'response_data');
    const usage =
      isObject(response) && isObject(response.usage) ? (response.usage as JsonObject) : undefined;
    const u = {
      inputTokens: asCount(usage?.prompt_tokens ?? usage?.input_tokens),
      outputTokens: asCount(usage?.completion_tokens ?? usage?.output_tokens),
      totalTokens: asCount(usage?.total_tokens),
      costUsd: asCount(span.attributes['operation.cost']),
    };
    return usageReading(u);
  },
};
