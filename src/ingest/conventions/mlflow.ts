import type { Span, StepType } from '../../core/index.js';
import { readToolMessage } from './langchain.js';
import { readMessages } from './messages.js';
import { payloadUsage, requestMessages, responseMessages } from './payloads.js';
import type {
  ConventionReader,
  IoReading,
  MessagesReading,
  ToolCallReading,
  UsageReading,
} from './reader.js';
import { attributeLabels, labelsFrom, usageReading } from './reader.js';
import {
  asCount,
  asString,
  decodeJsonEncoded,
  hasPrefix,
  isObject,
  type JsonObject,
  rawArguments,
  unwrapSingleKey,
} from './values.js';

/**
 * MLflow's own span attributes as its SDK exports them over OTLP (conventions reference §4):
 * `mlflow.spanType`, `mlflow.spanInputs` / `mlflow.spanOutputs` (every value JSON-encoded, plain
 * strings included), `mlflow.chat.tokenUsage`, `mlflow.llm.*`, `mlflow.chat.messages` (≤ 3.2),
 * `mlflow.traceTag.*`. Autolog model spans carry the provider's native request and response; they
 * are read as OpenAI chat, OpenAI Responses, Anthropic messages or LangChain, by shape.
 */

export const MLFLOW_SPAN_TYPES: Record<string, StepType> = {
  LLM: 'llm',
  CHAT_MODEL: 'llm',
  AGENT: 'agent',
  TOOL: 'tool',
  RETRIEVER: 'retrieval',
  RERANKER: 'retrieval',
  MEMORY: 'retrieval',
  EMBEDDING: 'embedding',
  GUARDRAIL: 'guardrail',
  CHAIN: 'generic',
  PARSER: 'generic',
  UNKNOWN: 'generic',
  WORKFLOW: 'generic',
  TASK: 'generic',
  EVALUATOR: 'generic',
};

function mv(span: Span, key: string): unknown {
  return decodeJsonEncoded(span.attributes[key]);
}

function chatMessages(span: Span): MessagesReading | undefined {
  const list = readMessages(mv(span, 'mlflow.chat.messages'));
  if (!list) return undefined;
  // Input and output concatenated: the trailing assistant message is the output.
  const last = list[list.length - 1];
  if (last?.role === 'assistant' && list.length > 1) {
    return { input: list.slice(0, -1), output: [last] };
  }
  return { input: list };
}

export const mlflow: ConventionReader = {
  name: 'mlflow',
  // LangChain's `invocation_params` and OpenInference's session, user and metadata too.
  reads: {
    keys: ['invocation_params', 'session.id', 'user.id', 'metadata'],
    prefixes: ['mlflow.'],
  },

  detect(span) {
    return hasPrefix(span, 'mlflow.');
  },

  stepType(span) {
    const type = asString(mv(span, 'mlflow.spanType'));
    if (!type) return undefined;
    const upper = type.toUpperCase();
    return { type: MLFLOW_SPAN_TYPES[upper] ?? 'generic', evaluator: upper === 'EVALUATOR' };
  },

  model(span) {
    const outputs = mv(span, 'mlflow.spanOutputs');
    const inputs = mv(span, 'mlflow.spanInputs');
    const llmOutput =
      isObject(outputs) && isObject(outputs.llm_output) ? outputs.llm_output : undefined;
    const params = mv(span, 'invocation_params');
    const response =
      asString(mv(span, 'mlflow.llm.model')) ??
      (isObject(outputs) ? asString(outputs.model) : undefined) ??
      asString(llmOutput?.model_name);
    const request =
      (isObject(inputs) ? asString(inputs.model) : undefined) ??
      (isObject(params) ? (asString(params.model) ?? asString(params.model_name)) : undefined);
    return response || request ? { response, request } : undefined;
  },

  messages(span) {
    const legacy = chatMessages(span);
    if (legacy) return legacy;
    const out: MessagesReading = {};
    const input = requestMessages(mv(span, 'mlflow.spanInputs'));
    const output = responseMessages(mv(span, 'mlflow.spanOutputs'));
    if (input) out.input = input;
    if (output) out.output = output;
    return out.input || out.output ? out : undefined;
  },

  toolCall(span) {
    const out: ToolCallReading = {};
    const inputs = span.attributes['mlflow.spanInputs'];
    if (inputs !== undefined) out.arguments = rawArguments(inputs);
    if (span.attributes['mlflow.spanOutputs'] !== undefined) {
      const value = mv(span, 'mlflow.spanOutputs');
      const message = readToolMessage(value);
      out.resultPresent = true;
      if (message) {
        out.result = message.content;
        if (message.id) out.id = message.id;
        if (message.name) out.name = message.name;
        if (message.error) out.error = message.error;
      } else out.result = value;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  },

  io(span, type) {
    const out: IoReading = {};
    const inputs = mv(span, 'mlflow.spanInputs');
    const outputs = mv(span, 'mlflow.spanOutputs');
    if (inputs !== undefined) out.input = type === 'tool' ? inputs : unwrapSingleKey(inputs);
    if (outputs !== undefined) out.output = outputs;
    return out.input !== undefined || out.output !== undefined ? out : undefined;
  },

  usage(span) {
    const tokens = mv(span, 'mlflow.chat.tokenUsage');
    const cost = mv(span, 'mlflow.llm.cost');
    let u: UsageReading | undefined;
    if (isObject(tokens)) {
      u = {
        inputTokens: asCount(tokens.input_tokens),
        outputTokens: asCount(tokens.output_tokens),
        totalTokens: asCount(tokens.total_tokens),
      };
    } else u = payloadUsage(mv(span, 'mlflow.spanOutputs'));
    if (isObject(cost)) {
      const c = costOf(cost);
      if (c !== undefined) u = { ...u, costUsd: c };
    }
    return u && usageReading(u);
  },

  session(span) {
    return asString(mv(span, 'session.id'));
  },

  user(span) {
    return asString(mv(span, 'user.id'));
  },

  labels(span) {
    const meta = mv(span, 'metadata');
    return {
      ...(isObject(meta) ? labelsFrom(Object.entries(meta)) : undefined),
      ...attributeLabels(span.attributes, 'mlflow.traceTag.', decodeJsonEncoded),
    };
  },
};

function costOf(cost: JsonObject): number | undefined {
  const total = asCount(cost.total_cost);
  if (total !== undefined) return total;
  const input = asCount(cost.input_cost);
  const output = asCount(cost.output_cost);
  return input !== undefined || output !== undefined ? (input ?? 0) + (output ?? 0) : undefined;
}
