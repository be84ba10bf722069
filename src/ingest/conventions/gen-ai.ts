import type { Attributes, Message, Span, StepType } from '../../core/index.js';
import { readToolMessage } from './langchain.js';
import { messagesFromParts, readMessages } from './messages.js';
import { MLFLOW_SPAN_TYPES } from './mlflow.js';
import type { ConventionReader, IoReading, MessagesReading, ToolCallReading } from './reader.js';
import { usageReading } from './reader.js';
import {
  asCount,
  asString,
  attrNumber,
  attrString,
  firstString,
  isObject,
  jsonSafe,
  parseAnyJson,
  rawArguments,
  sniffJson,
  sniffParse,
  unwrapEnvelope,
} from './values.js';

/**
 * OpenTelemetry GenAI semantic conventions, current form (conventions reference §1): operation
 * name, message attributes in the parts model, tool call attributes, `gen_ai.usage.*`. Also what
 * other emitters put in these names: Vercel AI SDK v7, Pydantic AI, OpenLLMetry 2026 spans and
 * MLflow's GenAI export mode.
 */

const OPERATIONS: Record<string, StepType> = {
  chat: 'llm',
  text_completion: 'llm',
  generate_content: 'llm',
  completion: 'llm',
  generate: 'llm',
  response: 'llm',
  embeddings: 'embedding',
  retrieval: 'retrieval',
  search_memory: 'retrieval',
  rerank: 'retrieval',
  vector_db_retrieve: 'retrieval',
  execute_tool: 'tool',
  invoke_agent: 'agent',
  apply_guardrail: 'guardrail',
  handoff: 'handoff',
};

const NOT_SPECIFIED = '<not specified>';

/** Messages from the three GenAI message attributes of an attribute map (span or event). */
export function genAiMessages(attributes: Attributes): MessagesReading | undefined {
  const system = jsonValue(attributes['gen_ai.system_instructions']);
  const out: MessagesReading = {};
  const inMessages: Message[] = [];
  if (system !== undefined && system !== '')
    inMessages.push(...messagesFromParts('system', system));
  const read = messagesOf(attributes['gen_ai.input.messages']);
  if (read) inMessages.push(...read);
  if (inMessages.length > 0) out.input = inMessages;
  const outMessages = messagesOf(attributes['gen_ai.output.messages']);
  // A list of its own per step: the messages in it may be shared with other steps.
  if (outMessages) out.output = outMessages.slice();
  return out.input || out.output ? out : undefined;
}

/**
 * The messages of a GenAI message attribute. Those of a JSON text are read once per
 * normalization and kept with its parse: model calls resend the conversation so far, and the
 * messages were read again for every call (nothing writes to a Message once read).
 */
function messagesOf(value: unknown): Message[] | undefined {
  if (typeof value !== 'string') return readMessages(jsonValue(value));
  const parsed = sniffParse(value);
  if (parsed === undefined) return readMessages(value);
  if (parsed.messages === undefined) parsed.messages = readMessages(parsed.value) ?? null;
  return parsed.messages ?? undefined;
}

function jsonValue(value: unknown): unknown {
  if (value === undefined) return undefined;
  return typeof value === 'string' ? sniffJson(value) : jsonSafe(value);
}

function attrJson(span: Span, key: string): unknown {
  return jsonValue(span.attributes[key]);
}

/**
 * Tool arguments: OpenLLMetry's LangChain tool spans put LangChain's envelope
 * `{input_str, tags, metadata, inputs, kwargs}` here instead of the arguments (§5.4).
 */
function toolArguments(value: unknown): string | undefined {
  const parsed = jsonValue(value);
  if (isObject(parsed) && ('input_str' in parsed || 'inputs' in parsed) && 'tags' in parsed) {
    // `inputs` is the argument dict; `input_str` its Python repr (or a bare value).
    const inputs = parsed.inputs;
    const usable = isObject(inputs) && Object.keys(inputs).length > 0;
    return rawArguments(usable ? inputs : (parsed.input_str ?? inputs));
  }
  return rawArguments(typeof value === 'string' ? value : jsonSafe(value));
}

/** A tool result, unwrapping OpenLLMetry's `{output, kwargs}` and a serialized ToolMessage. */
export function toolResult(value: unknown): Pick<ToolCallReading, 'result' | 'id' | 'error'> {
  // Documented as JSON: a JSON string literal (`"14:05"`) is the text it encodes.
  const unwrapped = unwrapEnvelope(
    typeof value === 'string' ? parseAnyJson(value) : jsonSafe(value),
  );
  const message = readToolMessage(unwrapped);
  if (message) {
    const out: Pick<ToolCallReading, 'result' | 'id' | 'error'> = { result: message.content };
    if (message.id) out.id = message.id;
    if (message.error) out.error = message.error;
    return out;
  }
  return { result: unwrapped };
}

function agentIo(span: Span): IoReading | undefined {
  const out: IoReading = {};
  const input = attrJson(span, 'gen_ai.input.messages');
  const output = attrJson(span, 'gen_ai.output.messages');
  if (input !== undefined) out.input = readMessages(input) ?? input;
  if (output !== undefined) out.output = readMessages(output) ?? output;
  return out.input !== undefined || out.output !== undefined ? out : undefined;
}

export const genAi: ConventionReader = {
  name: 'gen-ai',
  reads: { keys: [], prefixes: ['gen_ai.'] },

  detect(span) {
    const a = span.attributes;
    return (
      'gen_ai.operation.name' in a ||
      'gen_ai.provider.name' in a ||
      'gen_ai.input.messages' in a ||
      'gen_ai.output.messages' in a ||
      'gen_ai.tool.name' in a ||
      'gen_ai.usage.input_tokens' in a ||
      'gen_ai.request.model' in a
    );
  },

  stepType(span, ctx) {
    const op = attrString(span, 'gen_ai.operation.name');
    if (!op) return undefined;
    const known = OPERATIONS[op];
    if (known) return { type: known };
    if (op === 'invoke_workflow') return { type: ctx.isRoot ? 'agent' : 'generic' };
    // MLflow's GenAI export passes unmapped span types through in upper case (`CHAIN`).
    if (op === op.toUpperCase() && MLFLOW_SPAN_TYPES[op]) {
      return { type: MLFLOW_SPAN_TYPES[op], evaluator: op === 'EVALUATOR' };
    }
    return { type: 'generic' };
  },

  impliedType(span) {
    const a = span.attributes;
    if ('gen_ai.tool.name' in a || 'gen_ai.tool.call.id' in a) return 'tool';
    if ('gen_ai.retrieval.query.text' in a || 'gen_ai.retrieval.documents' in a) return 'retrieval';
    const model = 'gen_ai.request.model' in a || 'gen_ai.response.model' in a;
    const content =
      'gen_ai.input.messages' in a ||
      'gen_ai.output.messages' in a ||
      'gen_ai.usage.input_tokens' in a ||
      'gen_ai.usage.output_tokens' in a;
    return model && content ? 'llm' : undefined;
  },

  stepName(span, type) {
    if (type === 'tool') return attrString(span, 'gen_ai.tool.name');
    if (type === 'agent') return firstString(span, ['gen_ai.agent.name', 'gen_ai.workflow.name']);
    if (type === 'guardrail') return attrString(span, 'gen_ai.guardrail.component.name');
    return undefined;
  },

  model(span) {
    const response = attrString(span, 'gen_ai.response.model');
    const request = attrString(span, 'gen_ai.request.model');
    return response || request ? { response, request } : undefined;
  },

  messages(span) {
    return genAiMessages(span.attributes);
  },

  toolCall(span) {
    const a = span.attributes;
    const out: ToolCallReading = {};
    const name = attrString(span, 'gen_ai.tool.name');
    if (name) out.name = name;
    const id = attrString(span, 'gen_ai.tool.call.id')?.trim();
    if (id && id !== NOT_SPECIFIED) out.id = id;
    if (a['gen_ai.tool.call.arguments'] !== undefined) {
      out.arguments = toolArguments(a['gen_ai.tool.call.arguments']);
    }
    if (a['gen_ai.tool.call.result'] !== undefined) {
      const r = toolResult(a['gen_ai.tool.call.result']);
      out.result = r.result;
      out.resultPresent = true;
      if (r.error) out.error = r.error;
      if (!out.id && r.id) out.id = r.id;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  },

  io(span, type) {
    if (type === 'retrieval') {
      const out: IoReading = {};
      const query = attrString(span, 'gen_ai.retrieval.query.text');
      if (query !== undefined) out.input = query;
      const docs = attrJson(span, 'gen_ai.retrieval.documents');
      if (docs !== undefined) out.output = docs;
      if (out.input !== undefined || out.output !== undefined) return out;
    }
    if (type === 'guardrail') {
      const result: Record<string, unknown> = {};
      for (const key of ['type', 'value', 'reason'] as const) {
        const v = span.attributes[`gen_ai.guardrail.result.${key}`];
        if (v !== undefined) result[key] = jsonSafe(v);
      }
      if (Object.keys(result).length > 0) return { output: result };
    }
    if (type === 'handoff') {
      const from = attrString(span, 'gen_ai.handoff.from_agent');
      const to = attrString(span, 'gen_ai.handoff.to_agent');
      if (from || to) return { input: from, output: to };
    }
    return agentIo(span);
  },

  usage(span) {
    const u = {
      inputTokens: attrNumber(span, 'gen_ai.usage.input_tokens'),
      outputTokens: attrNumber(span, 'gen_ai.usage.output_tokens'),
      totalTokens: attrNumber(span, 'gen_ai.usage.total_tokens'),
      costUsd: asCount(span.attributes['gen_ai.usage.cost']),
    };
    return usageReading(u);
  },

  session(span) {
    return asString(span.attributes['gen_ai.conversation.id']);
  },
};
