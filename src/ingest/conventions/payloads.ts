import type { Message, ToolCall } from '../../core/index.js';
import { readMessages } from './messages.js';
import type { UsageReading } from './reader.js';
import { usageReading } from './reader.js';
import { asCount, asString, isObject, rawArguments } from './values.js';

/**
 * Provider request and response payloads as instrumentations record them whole (MLflow autolog
 * `mlflow.spanInputs` / `mlflow.spanOutputs`, OpenInference `input.value` / `output.value` on model
 * spans, Logfire `request_data` / `response_data`): OpenAI chat completions, the OpenAI Responses
 * API, Anthropic messages and LangChain chat-model runs, recognised by shape.
 */

/** OpenAI Responses API items (`input` list or `output` list) as messages. */
function responsesItems(items: unknown): Message[] | undefined {
  if (typeof items === 'string') return [{ role: 'user', content: items }];
  if (!Array.isArray(items)) return undefined;
  const out: Message[] = [];
  for (const item of items) {
    if (!isObject(item)) continue;
    if (item.type === 'function_call') {
      const name = asString(item.name);
      if (!name) continue;
      const tc: ToolCall = { name, arguments: rawArguments(item.arguments) ?? '' };
      const id = asString(item.call_id) ?? asString(item.id);
      if (id) tc.id = id;
      const last = out[out.length - 1];
      if (last?.role === 'assistant' && last.content === undefined) {
        last.toolCalls = [...(last.toolCalls ?? []), tc];
      } else out.push({ role: 'assistant', toolCalls: [tc] });
    } else if (item.type === 'function_call_output') {
      const m = readMessages({ role: 'tool', tool_call_id: item.call_id, content: item.output });
      if (m) out.push(...m);
    } else if (typeof item.role === 'string') {
      const m = readMessages({ role: item.role, content: item.content });
      if (m) out.push(...m);
    }
  }
  return out.length > 0 ? out : undefined;
}

/** Messages of a provider request payload. */
export function requestMessages(inputs: unknown): Message[] | undefined {
  if (Array.isArray(inputs)) {
    // LangChain chat models: a list of message lists (first batch), or one message list.
    const first = inputs[0];
    return readMessages(Array.isArray(first) && !(typeof first[0] === 'string') ? first : inputs);
  }
  if (!isObject(inputs)) return undefined;
  if (Array.isArray(inputs.messages)) {
    const messages = requestMessages(inputs.messages) ?? [];
    const system = inputs.system;
    const head: Message[] = [];
    if (typeof system === 'string' && system) head.push({ role: 'system', content: system });
    else if (Array.isArray(system))
      head.push(...(readMessages({ role: 'system', content: system }) ?? []));
    const all = [...head, ...messages];
    return all.length > 0 ? all : undefined;
  }
  if (inputs.input !== undefined && ('model' in inputs || 'instructions' in inputs)) {
    const items = responsesItems(inputs.input) ?? [];
    const instructions = asString(inputs.instructions);
    const all: Message[] = instructions
      ? [{ role: 'system', content: instructions }, ...items]
      : items;
    return all.length > 0 ? all : undefined;
  }
  return undefined;
}

/** Messages of a provider response payload. */
export function responseMessages(outputs: unknown): Message[] | undefined {
  if (typeof outputs === 'string') return [{ role: 'assistant', content: outputs }];
  if (!isObject(outputs)) return undefined;
  if (Array.isArray(outputs.choices)) {
    const messages = outputs.choices
      .map((c) =>
        isObject(c)
          ? (c.message ??
            (c.text !== undefined ? { role: 'assistant', content: c.text } : undefined))
          : undefined,
      )
      .filter((m) => m !== undefined);
    return readMessages(messages);
  }
  if (Array.isArray(outputs.generations)) {
    const batch = outputs.generations[0];
    if (!Array.isArray(batch)) return undefined;
    const out: Message[] = [];
    for (const g of batch) {
      if (!isObject(g)) continue;
      const m = g.message !== undefined ? readMessages(g.message) : undefined;
      if (m) out.push(...m);
      else if (typeof g.text === 'string') out.push({ role: 'assistant', content: g.text });
    }
    return out.length > 0 ? out : undefined;
  }
  if (Array.isArray(outputs.output) && outputs.object === 'response')
    return responsesItems(outputs.output);
  if (outputs.role !== undefined || outputs.type !== undefined) return readMessages(outputs);
  return undefined;
}

/** Token usage inside a provider response payload (OpenAI, Anthropic, LangChain). */
export function payloadUsage(outputs: unknown): UsageReading | undefined {
  if (!isObject(outputs)) return undefined;
  const llmOutput = isObject(outputs.llm_output) ? outputs.llm_output : undefined;
  const usage = isObject(outputs.usage)
    ? outputs.usage
    : llmOutput && isObject(llmOutput.token_usage)
      ? llmOutput.token_usage
      : undefined;
  if (!usage) return undefined;
  const u: UsageReading = {
    inputTokens: asCount(usage.prompt_tokens ?? usage.input_tokens),
    outputTokens: asCount(usage.completion_tokens ?? usage.output_tokens),
    totalTokens: asCount(usage.total_tokens),
  };
  return usageReading(u);
}
