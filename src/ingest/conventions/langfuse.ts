import type { Message, Span, StepType } from '../../core/index.js';
import { readToolMessage } from './langchain.js';
import { readMessages } from './messages.js';
import type { ConventionReader, IoReading, ToolCallReading, UsageReading } from './reader.js';
import { attributeLabels, labelsFrom, usageReading } from './reader.js';
import {
  asCount,
  attrString,
  envelopeArguments,
  firstString,
  hasPrefix,
  isObject,
  jsonAttr,
  unwrapEnvelope,
} from './values.js';

/**
 * Langfuse SDK v3+ observation attributes (conventions reference §7): `langfuse.observation.*`
 * (type, input, output, model, usage and cost details, level, status message, metadata) and the
 * trace-level `langfuse.trace.*` that the SDK writes on (usually) the root span.
 */

const TYPES: Record<string, StepType> = {
  generation: 'llm',
  embedding: 'embedding',
  agent: 'agent',
  tool: 'tool',
  chain: 'generic',
  retriever: 'retrieval',
  evaluator: 'generic',
  guardrail: 'guardrail',
  event: 'generic',
};

const OBS = 'langfuse.observation.';

function value(span: Span, which: 'input' | 'output'): unknown {
  return jsonAttr(span, `${OBS}${which}`);
}

function chat(v: unknown, role: string): Message[] | undefined {
  if (typeof v === 'string') return v ? [{ role, content: v }] : undefined;
  return readMessages(v);
}

export const langfuse: ConventionReader = {
  name: 'langfuse',
  // OpenInference's session and user ids too (§7.3).
  reads: { keys: ['session.id', 'user.id'], prefixes: ['langfuse.'] },

  detect(span) {
    return hasPrefix(span, 'langfuse.');
  },

  stepType(span) {
    const type = attrString(span, `${OBS}type`)?.toLowerCase();
    if (!type) return undefined;
    if (type === 'span') {
      // Python SDK ≤ 3.3 wrote `span` for generations too; model or usage tells (§7.1).
      const a = span.attributes;
      const llm = `${OBS}model.name` in a || `${OBS}usage_details` in a;
      return { type: llm ? 'llm' : 'generic' };
    }
    return { type: TYPES[type] ?? 'generic', evaluator: type === 'evaluator' };
  },

  impliedType(span) {
    return `${OBS}model.name` in span.attributes ? 'llm' : undefined;
  },

  model(span) {
    const response = attrString(span, `${OBS}model.name`);
    return response ? { response } : undefined;
  },

  messages(span) {
    const input = chat(value(span, 'input'), 'user');
    const output = chat(value(span, 'output'), 'assistant');
    if (!input && !output) return undefined;
    return { ...(input ? { input } : {}), ...(output ? { output } : {}) };
  },

  toolCall(span) {
    const out: ToolCallReading = {};
    const args = envelopeArguments(span.attributes[`${OBS}input`]);
    if (args !== undefined) out.arguments = args;
    const output = value(span, 'output');
    if (output !== undefined) {
      const message = readToolMessage(output);
      out.resultPresent = true;
      if (message) {
        out.result = message.content;
        if (message.id) out.id = message.id;
        if (message.error) out.error = message.error;
      } else out.result = output;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  },

  io(span) {
    const out: IoReading = {};
    const input = value(span, 'input');
    const output = value(span, 'output');
    if (input !== undefined) out.input = unwrapEnvelope(input);
    if (output !== undefined) out.output = output;
    return out.input !== undefined || out.output !== undefined ? out : undefined;
  },

  traceIo(span) {
    const out: IoReading = {};
    const input = jsonAttr(span, 'langfuse.trace.input');
    const output = jsonAttr(span, 'langfuse.trace.output');
    if (input !== undefined) out.input = unwrapEnvelope(input);
    if (output !== undefined) out.output = output;
    return out.input !== undefined || out.output !== undefined ? out : undefined;
  },

  usage(span) {
    const details = jsonAttr(span, `${OBS}usage_details`);
    const cost = jsonAttr(span, `${OBS}cost_details`);
    const u: UsageReading = {};
    if (isObject(details)) {
      u.inputTokens = asCount(details.input ?? details.prompt_tokens ?? details.input_tokens);
      u.outputTokens = asCount(
        details.output ?? details.completion_tokens ?? details.output_tokens,
      );
      u.totalTokens = asCount(details.total ?? details.total_tokens);
    }
    if (isObject(cost)) {
      const input = asCount(cost.input);
      const output = asCount(cost.output);
      u.costUsd =
        asCount(cost.total) ??
        (input !== undefined || output !== undefined ? (input ?? 0) + (output ?? 0) : undefined);
    }
    return usageReading(u);
  },

  error(span) {
    if (attrString(span, `${OBS}level`)?.toUpperCase() !== 'ERROR') return undefined;
    return attrString(span, `${OBS}status_message`) ?? 'ERROR';
  },

  session(span) {
    return firstString(span, ['langfuse.session.id', 'session.id']);
  },

  user(span) {
    return firstString(span, ['langfuse.user.id', 'user.id']);
  },

  labels(span) {
    const a = span.attributes;
    const json = (key: string) => {
      const v = jsonAttr(span, key);
      return isObject(v) ? labelsFrom(Object.entries(v)) : undefined;
    };
    return {
      ...json('langfuse.trace.metadata'),
      ...attributeLabels(a, 'langfuse.trace.metadata.'),
      ...json(`${OBS}metadata`),
      ...attributeLabels(a, 'langfuse.metadata.'),
      ...attributeLabels(a, `${OBS}metadata.`),
    };
  },
};
