import type { AttributeValue, Message, Span, StepType } from '../../core/index.js';
import { readToolMessage } from './langchain.js';
import { readMessages } from './messages.js';
import type {
  ConventionReader,
  IoReading,
  MessagesReading,
  ToolCallReading,
  UsageReading,
} from './reader.js';
import { labelsFrom, usageReading } from './reader.js';
import {
  asCount,
  asString,
  attrNumber,
  attrString,
  firstString,
  hasIndexed,
  indexed,
  indexedFields,
  isObject,
  type JsonObject,
  jsonSafe,
  parsePythonLiteral,
  rawArguments,
  sniffJson,
  tryParse,
} from './values.js';

/**
 * OpenInference (Arize Phoenix; conventions reference §3): `openinference.span.kind`,
 * `input.value` / `output.value` with their MIME types, flattened `llm.input_messages.*` /
 * `llm.output_messages.*`, `llm.token_count.*`, `llm.cost.*`, `tool.*`, `retrieval.documents.*`,
 * `embedding.*`, `session.id`, `user.id` and the JSON `metadata` attribute.
 */

const KINDS: Record<string, StepType> = {
  LLM: 'llm',
  EMBEDDING: 'embedding',
  RETRIEVER: 'retrieval',
  RERANKER: 'retrieval',
  TOOL: 'tool',
  AGENT: 'agent',
  GUARDRAIL: 'guardrail',
  CHAIN: 'generic',
  EVALUATOR: 'generic',
  PROMPT: 'generic',
  UNKNOWN: 'generic',
};

/** `input.value` / `output.value` decoded by their MIME type, then sniffed (§3.2). */
function oiValue(span: Span, which: 'input' | 'output'): unknown {
  const raw = span.attributes[`${which}.value`];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string') return jsonSafe(raw);
  const mime = attrString(span, `${which}.mime_type`)?.toLowerCase() ?? '';
  if (mime.includes('json')) {
    const parsed = tryParse(raw.trim());
    if (parsed.ok) return parsed.value;
    // LangChain tool inputs: Python repr tagged as JSON (§8.1).
    const literal = parsePythonLiteral(raw);
    if (literal.ok && typeof literal.value === 'object' && literal.value !== null) {
      return literal.value;
    }
    return raw;
  }
  return sniffJson(raw);
}

function field(fields: Map<string, AttributeValue>, key: string): unknown {
  const v = fields.get(key);
  return v === undefined ? undefined : jsonSafe(v);
}

/** One flattened message into the OpenAI-like shape `readMessages` knows. */
function flatMessage(fields: Map<string, AttributeValue>, defaultRole: string): JsonObject {
  const m: JsonObject = { role: asString(field(fields, 'message.role')) ?? defaultRole };
  const contents = indexedFields(fields, 'message.contents');
  if (contents.length > 0) {
    m.content = contents.map(({ fields: c }) => {
      const type = asString(field(c, 'message_content.type')) ?? 'text';
      if (type === 'image') {
        return {
          type: 'image_url',
          image_url: { url: field(c, 'message_content.image.image.url') },
        };
      }
      if (type === 'tool_use') {
        return {
          type: 'tool_use',
          id: field(c, 'tool_call.id'),
          name: field(c, 'tool_call.function.name'),
          input: field(c, 'tool_call.function.arguments'),
        };
      }
      if (type === 'text') return { type: 'text', text: field(c, 'message_content.text') ?? '' };
      return { type, text: field(c, 'message_content.text') };
    });
  } else {
    const content = field(fields, 'message.content');
    if (content !== undefined) m.content = content;
  }
  const calls = indexedFields(fields, 'message.tool_calls');
  if (calls.length > 0) {
    m.tool_calls = calls.map(({ fields: c }) => ({
      id: field(c, 'tool_call.id'),
      function: {
        name: field(c, 'tool_call.function.name'),
        arguments: field(c, 'tool_call.function.arguments'),
      },
    }));
  }
  const fnName = asString(field(fields, 'message.function_call_name'));
  if (fnName) {
    m.function_call = {
      name: fnName,
      arguments: field(fields, 'message.function_call_arguments_json'),
    };
  }
  const toolCallId = field(fields, 'message.tool_call_id');
  if (toolCallId !== undefined) m.tool_call_id = toolCallId;
  const name = field(fields, 'message.name');
  if (name !== undefined) m.name = name;
  return m;
}

function flatMessages(span: Span, prefix: string, defaultRole: string): Message[] | undefined {
  const entries = indexed(span.attributes, prefix);
  if (entries.length === 0) return undefined;
  const out: Message[] = [];
  for (const { fields } of entries) {
    const m = readMessages(flatMessage(fields, defaultRole));
    if (m) out.push(...m);
  }
  return out.length > 0 ? out : undefined;
}

/** Legacy completions API: `llm.prompts.N.prompt.text` (or a string list) and choices. */
function promptTexts(span: Span, key: string, leaf: string): string[] {
  const direct = span.attributes[key];
  if (Array.isArray(direct)) return direct.filter((v): v is string => typeof v === 'string');
  return indexed(span.attributes, key)
    .map(({ fields }) => asString(field(fields, leaf)))
    .filter((v): v is string => v !== undefined);
}

function documents(span: Span, prefix: string): unknown[] | undefined {
  const entries = indexed(span.attributes, prefix);
  if (entries.length === 0) return undefined;
  return entries.map(({ fields }) => {
    const doc: JsonObject = {};
    for (const key of ['id', 'content', 'score'] as const) {
      const v = field(fields, `document.${key}`);
      if (v !== undefined) doc[key] = v;
    }
    const meta = field(fields, 'document.metadata');
    if (meta !== undefined) doc.metadata = sniffJson(meta);
    return doc;
  });
}

function metadata(span: Span): JsonObject | undefined {
  const raw = span.attributes.metadata;
  const v = typeof raw === 'string' ? sniffJson(raw) : jsonSafe(raw);
  if (isObject(v)) return v;
  if (typeof raw === 'string') {
    const literal = parsePythonLiteral(raw);
    if (literal.ok && isObject(literal.value)) return literal.value;
  }
  return undefined;
}

export const openInference: ConventionReader = {
  name: 'openinference',
  reads: {
    keys: [
      'openinference.span.kind',
      'input.value',
      'input.mime_type',
      'output.value',
      'output.mime_type',
      'tool.name',
      'tool.id',
      'tool_call.id',
      'tool_call.function.name',
      'tool_call.function.arguments',
      'agent.name',
      'session.id',
      'user.id',
      'metadata',
      'llm.model_name',
      'llm.request.model_name',
      'llm.response.model_name',
      'llm.prompts',
      'llm.choices',
      'embedding.model_name',
      'reranker.model_name',
      'reranker.query',
    ],
    prefixes: [
      'llm.input_messages.',
      'llm.output_messages.',
      'llm.prompts.',
      'llm.choices.',
      'llm.token_count.',
      'llm.cost.',
      'retrieval.documents.',
      'reranker.output_documents.',
      'embedding.embeddings.',
    ],
  },

  detect(span) {
    const a = span.attributes;
    return (
      'openinference.span.kind' in a ||
      'input.value' in a ||
      'output.value' in a ||
      hasIndexed(a, 'llm.input_messages') ||
      hasIndexed(a, 'llm.output_messages') ||
      'llm.token_count.prompt' in a ||
      'llm.model_name' in a ||
      'tool.name' in a
    );
  },

  stepType(span) {
    const kind = attrString(span, 'openinference.span.kind')?.toUpperCase();
    if (!kind) return undefined;
    return { type: KINDS[kind] ?? 'generic', evaluator: kind === 'EVALUATOR' };
  },

  impliedType(span) {
    const a = span.attributes;
    if ('tool.name' in a) return 'tool';
    if (hasIndexed(a, 'retrieval.documents')) return 'retrieval';
    if ('embedding.model_name' in a || hasIndexed(a, 'embedding.embeddings')) return 'embedding';
    const model = 'llm.model_name' in a;
    const content =
      hasIndexed(a, 'llm.input_messages') ||
      hasIndexed(a, 'llm.output_messages') ||
      'llm.token_count.prompt' in a ||
      'llm.token_count.completion' in a;
    return model && content ? 'llm' : undefined;
  },

  stepName(span, type) {
    if (type === 'tool') return firstString(span, ['tool.name', 'tool_call.function.name']);
    if (type === 'agent') return attrString(span, 'agent.name');
    return undefined;
  },

  model(span) {
    const response = firstString(span, ['llm.response.model_name', 'llm.model_name']);
    const request = firstString(span, [
      'llm.request.model_name',
      'embedding.model_name',
      'reranker.model_name',
    ]);
    return response || request ? { response, request } : undefined;
  },

  messages(span) {
    const out: MessagesReading = {};
    const input = flatMessages(span, 'llm.input_messages', 'user');
    const output = flatMessages(span, 'llm.output_messages', 'assistant');
    if (input) out.input = input;
    else {
      const prompts = promptTexts(span, 'llm.prompts', 'prompt.text');
      if (prompts.length > 0) out.input = prompts.map((content) => ({ role: 'user', content }));
    }
    if (output) out.output = output;
    else {
      const choices = promptTexts(span, 'llm.choices', 'completion.text');
      if (choices.length > 0) {
        out.output = choices.map((content) => ({ role: 'assistant', content }));
      }
    }
    return out.input || out.output ? out : undefined;
  },

  toolCall(span) {
    const out: ToolCallReading = {};
    const name = firstString(span, ['tool.name', 'tool_call.function.name']);
    if (name) out.name = name;
    const id = firstString(span, ['tool.id', 'tool_call.id'])?.trim();
    if (id) out.id = id;
    const args = span.attributes['tool_call.function.arguments'] ?? span.attributes['input.value'];
    if (args !== undefined) out.arguments = rawArguments(args);
    if (span.attributes['output.value'] !== undefined) {
      const value = oiValue(span, 'output');
      const message = readToolMessage(value);
      out.resultPresent = true;
      if (message) {
        out.result = message.content;
        if (!out.id && message.id) out.id = message.id;
        if (message.error) out.error = message.error;
      } else out.result = value;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  },

  io(span, type) {
    const out: IoReading = {};
    if (type === 'retrieval') {
      const query = attrString(span, 'reranker.query');
      const docs =
        documents(span, 'retrieval.documents') ?? documents(span, 'reranker.output_documents');
      if (query !== undefined) out.input = query;
      if (docs) out.output = docs;
    }
    if (type === 'embedding') {
      const texts = indexed(span.attributes, 'embedding.embeddings')
        .map(({ fields }) => field(fields, 'embedding.text'))
        .filter((t) => t !== undefined);
      if (texts.length > 0) out.input = texts.length === 1 ? texts[0] : texts;
    }
    if (out.input === undefined) {
      const input = oiValue(span, 'input');
      if (input !== undefined) out.input = input;
    }
    if (out.output === undefined) {
      const output = oiValue(span, 'output');
      if (output !== undefined) out.output = output;
    }
    return out.input !== undefined || out.output !== undefined ? out : undefined;
  },

  usage(span) {
    const u: UsageReading = {
      inputTokens: attrNumber(span, 'llm.token_count.prompt'),
      outputTokens: attrNumber(span, 'llm.token_count.completion'),
      totalTokens: attrNumber(span, 'llm.token_count.total'),
    };
    const total = asCount(span.attributes['llm.cost.total']);
    const prompt = asCount(span.attributes['llm.cost.prompt']);
    const completion = asCount(span.attributes['llm.cost.completion']);
    u.costUsd =
      total ??
      (prompt !== undefined || completion !== undefined
        ? (prompt ?? 0) + (completion ?? 0)
        : undefined);
    return usageReading(u);
  },

  session(span) {
    const direct = attrString(span, 'session.id');
    if (direct) return direct;
    const meta = metadata(span);
    if (!meta) return undefined;
    return asString(meta.session_id) ?? asString(meta.conversation_id) ?? asString(meta.thread_id);
  },

  user(span) {
    return attrString(span, 'user.id');
  },

  labels(span) {
    const meta = metadata(span);
    return meta ? labelsFrom(Object.entries(meta)) : undefined;
  },
};
