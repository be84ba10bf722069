import type { AttributeValue, Message, Span, StepType } from '../../core/index.js';
import { toolResult } from './gen-ai.js';
import { readMessages } from './messages.js';
import type { ConventionReader, IoReading, MessagesReading, ToolCallReading } from './reader.js';
import { attributeLabels, usageReading } from './reader.js';
import {
  asString,
  attrNumber,
  attrString,
  envelopeArguments,
  firstString,
  hasIndexed,
  hasPrefix,
  indexed,
  indexedFields,
  type JsonObject,
  jsonSafe,
  parseAnyJson,
  tryParse,
  unwrapEnvelope,
} from './values.js';

/**
 * OpenLLMetry / Traceloop (conventions reference §5): `traceloop.span.kind`,
 * `traceloop.entity.*` (decorator and LangChain envelopes), `llm.request.type`, the indexed
 * `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` messages, `llm.usage.total_tokens` and
 * `traceloop.association.properties.*`. The 2026 spans use plain GenAI attributes (gen-ai.ts).
 */

const SPAN_KINDS: Record<string, StepType> = {
  agent: 'agent',
  tool: 'tool',
  handoff: 'handoff',
  task: 'generic',
  unknown: 'generic',
};

const REQUEST_TYPES: Record<string, StepType> = {
  chat: 'llm',
  completion: 'llm',
  embedding: 'embedding',
  rerank: 'retrieval',
};

const VECTOR_DBS = new Set([
  'pinecone',
  'chroma',
  'chromadb',
  'qdrant',
  'milvus',
  'weaviate',
  'lancedb',
  'marqo',
]);

const PROPS = 'traceloop.association.properties.';

function field(fields: Map<string, AttributeValue>, key: string): unknown {
  const v = fields.get(key);
  return v === undefined ? undefined : jsonSafe(v);
}

/** Indexed message content: text, or a JSON string of content blocks. */
function content(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const text = value.trim();
  if (text.startsWith('[')) {
    const parsed = tryParse(text);
    if (parsed.ok && Array.isArray(parsed.value)) return parsed.value;
  }
  return value;
}

function indexedMessages(span: Span, prefix: string, defaultRole: string): Message[] | undefined {
  const entries = indexed(span.attributes, prefix);
  if (entries.length === 0) return undefined;
  const out: Message[] = [];
  for (const { fields } of entries) {
    const m: JsonObject = { role: asString(field(fields, 'role')) ?? defaultRole };
    const c = field(fields, 'content');
    if (c !== undefined) m.content = content(c);
    const calls = indexedFields(fields, 'tool_calls');
    if (calls.length > 0) {
      m.tool_calls = calls.map(({ fields: t }) => ({
        id: field(t, 'id'),
        function: { name: field(t, 'name'), arguments: field(t, 'arguments') },
      }));
    }
    const fnName = field(fields, 'function_call.name');
    if (fnName !== undefined) {
      m.function_call = { name: fnName, arguments: field(fields, 'function_call.arguments') };
    }
    const id = field(fields, 'tool_call_id');
    if (id !== undefined) m.tool_call_id = id;
    const read = readMessages(m);
    if (read) out.push(...read);
  }
  return out.length > 0 ? out : undefined;
}

function entity(span: Span, which: 'input' | 'output'): unknown {
  const raw = span.attributes[`traceloop.entity.${which}`];
  if (raw === undefined) return undefined;
  return typeof raw === 'string' ? parseAnyJson(raw) : jsonSafe(raw);
}

export const openLlmetry: ConventionReader = {
  name: 'openllmetry',
  reads: {
    keys: [
      'llm.request.type',
      'llm.usage.total_tokens',
      'gen_ai.usage.prompt_tokens',
      'gen_ai.usage.completion_tokens',
      'db.system',
    ],
    prefixes: ['traceloop.', 'gen_ai.prompt.', 'gen_ai.completion.'],
  },

  detect(span) {
    const a = span.attributes;
    return (
      hasPrefix(span, 'traceloop.') ||
      'llm.request.type' in a ||
      'llm.usage.total_tokens' in a ||
      hasIndexed(a, 'gen_ai.prompt') ||
      hasIndexed(a, 'gen_ai.completion')
    );
  },

  stepType(span, ctx) {
    const kind = attrString(span, 'traceloop.span.kind')?.toLowerCase();
    if (kind === 'workflow') {
      // Workflows are chains; the root one is the run (§5.1, §5.4).
      return { type: ctx.isRoot || /agent/i.test(span.name) ? 'agent' : 'generic' };
    }
    if (kind) return { type: SPAN_KINDS[kind] ?? 'generic' };
    const request = attrString(span, 'llm.request.type')?.toLowerCase();
    if (request && REQUEST_TYPES[request]) return { type: REQUEST_TYPES[request] };
    return undefined;
  },

  impliedType(span) {
    const a = span.attributes;
    if (hasIndexed(a, 'gen_ai.prompt') || hasIndexed(a, 'gen_ai.completion')) return 'llm';
    const db = attrString(span, 'db.system')?.toLowerCase();
    if (db && VECTOR_DBS.has(db)) return 'retrieval';
    return undefined;
  },

  stepName(span, type) {
    if (type === 'tool') return attrString(span, 'traceloop.entity.name');
    if (type === 'agent')
      return firstString(span, ['traceloop.entity.name', 'traceloop.workflow.name']);
    return undefined;
  },

  messages(span) {
    const out: MessagesReading = {};
    const input = indexedMessages(span, 'gen_ai.prompt', 'user');
    const output = indexedMessages(span, 'gen_ai.completion', 'assistant');
    if (input) out.input = input;
    if (output) out.output = output;
    return out.input || out.output ? out : undefined;
  },

  toolCall(span) {
    const out: ToolCallReading = {};
    const name = attrString(span, 'traceloop.entity.name');
    if (name) out.name = name;
    const args = envelopeArguments(span.attributes['traceloop.entity.input']);
    if (args !== undefined) out.arguments = args;
    if (span.attributes['traceloop.entity.output'] !== undefined) {
      const r = toolResult(entity(span, 'output'));
      out.result = r.result;
      out.resultPresent = true;
      if (r.id) out.id = r.id;
      if (r.error) out.error = r.error;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  },

  io(span) {
    const out: IoReading = {};
    const input = entity(span, 'input');
    const output = entity(span, 'output');
    if (input !== undefined) out.input = unwrapEnvelope(input);
    if (output !== undefined) out.output = unwrapEnvelope(output);
    return out.input !== undefined || out.output !== undefined ? out : undefined;
  },

  usage(span) {
    const u = {
      inputTokens: attrNumber(span, 'gen_ai.usage.prompt_tokens'),
      outputTokens: attrNumber(span, 'gen_ai.usage.completion_tokens'),
      totalTokens: attrNumber(span, 'llm.usage.total_tokens'),
    };
    return usageReading(u);
  },

  session(span) {
    return attrString(span, `${PROPS}session_id`);
  },

  user(span) {
    return attrString(span, `${PROPS}user_id`);
  },

  labels(span) {
    return attributeLabels(span.attributes, PROPS);
  },
};
