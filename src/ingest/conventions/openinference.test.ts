import { describe, expect, it } from 'vitest';
import { RecordSchema } from '../../core/index.js';
import { normalizeTrace } from './index.js';
import {
  ANSWER,
  FINAL,
  json,
  QUESTION,
  SYSTEM,
  shuffled,
  span,
  stable,
  USER,
} from './spans.testkit.js';

/** OpenInference's spaced JSON, exactly as the §3.3 example writes the arguments. */
const OI_CALLS = {
  role: 'assistant',
  toolCalls: [
    { id: 'call_w1', name: 'get_weather', arguments: '{"city": "Paris"}' },
    { id: 'call_t1', name: 'get_time', arguments: '{"tz": "Europe/Paris"}' },
  ],
};

const callAttrs = {
  'llm.output_messages.0.message.role': 'assistant',
  'llm.output_messages.0.message.tool_calls.0.tool_call.id': 'call_w1',
  'llm.output_messages.0.message.tool_calls.0.tool_call.function.name': 'get_weather',
  'llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments': '{"city": "Paris"}',
  'llm.output_messages.0.message.tool_calls.1.tool_call.id': 'call_t1',
  'llm.output_messages.0.message.tool_calls.1.tool_call.function.name': 'get_time',
  'llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments':
    '{"tz": "Europe/Paris"}',
};

const history = {
  'llm.input_messages.0.message.role': 'system',
  'llm.input_messages.0.message.content': 'You are a travel helper.',
  'llm.input_messages.1.message.role': 'user',
  'llm.input_messages.1.message.content': QUESTION,
};

/** Conventions reference §3.3: OpenAI Agents instrumentor + OpenAI instrumentor style. */
function section33() {
  return [
    span('travel-helper', {
      start: 0,
      end: 2400,
      attrs: {
        'openinference.span.kind': 'AGENT',
        'agent.name': 'travel-helper',
        'graph.node.id': 'travel-helper',
        'input.value': QUESTION,
        'output.value': ANSWER,
        'session.id': 'conv-42',
        'user.id': 'u-7',
        'tag.tags': ['travel'],
        metadata: json({ env: 'prod', 'touchstone.label.team': 'travel' }),
      },
    }),
    span('ChatCompletion', {
      id: 'llm1',
      parent: 'travel-helper',
      start: 10,
      end: 900,
      attrs: {
        'openinference.span.kind': 'LLM',
        'llm.system': 'openai',
        'llm.provider': 'openai',
        'llm.model_name': 'gpt-4o-2024-08-06',
        'llm.invocation_parameters': json({ model: 'gpt-4o', temperature: 0 }),
        ...history,
        ...callAttrs,
        'llm.tools.0.tool.json_schema': json({
          type: 'function',
          function: { name: 'get_weather' },
        }),
        'llm.token_count.prompt': 120,
        'llm.token_count.completion': 40,
        'llm.token_count.total': 160,
        'input.mime_type': 'application/json',
        'input.value': json({ model: 'gpt-4o', messages: [] }),
        'output.value': json({ id: 'chatcmpl-1' }),
      },
    }),
    span('get_weather', {
      parent: 'travel-helper',
      start: 910,
      end: 1100,
      attrs: {
        'openinference.span.kind': 'TOOL',
        'tool.name': 'get_weather',
        'tool.parameters': json({ type: 'object', properties: { city: { type: 'string' } } }),
        'input.mime_type': 'application/json',
        'input.value': '{"city": "Paris"}',
        'output.mime_type': 'application/json',
        'output.value': '{"temp_c": 18, "sky": "sunny"}',
      },
    }),
    span('get_time', {
      parent: 'travel-helper',
      start: 1110,
      end: 1200,
      attrs: {
        'openinference.span.kind': 'TOOL',
        'tool.name': 'get_time',
        'input.value': '{"tz": "Europe/Paris"}',
        'output.value': '14:05',
      },
    }),
    span('ChatCompletion', {
      id: 'llm2',
      parent: 'travel-helper',
      start: 1210,
      end: 2390,
      attrs: {
        'openinference.span.kind': 'LLM',
        'llm.model_name': 'gpt-4o-2024-08-06',
        'llm.token_count.prompt': 210,
        'llm.token_count.completion': 25,
        ...history,
        'llm.input_messages.2.message.role': 'assistant',
        'llm.input_messages.2.message.tool_calls.0.tool_call.id': 'call_w1',
        'llm.input_messages.2.message.tool_calls.0.tool_call.function.name': 'get_weather',
        'llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments':
          '{"city": "Paris"}',
        'llm.input_messages.2.message.tool_calls.1.tool_call.id': 'call_t1',
        'llm.input_messages.2.message.tool_calls.1.tool_call.function.name': 'get_time',
        'llm.input_messages.2.message.tool_calls.1.tool_call.function.arguments':
          '{"tz": "Europe/Paris"}',
        'llm.input_messages.3.message.role': 'tool',
        'llm.input_messages.3.message.tool_call_id': 'call_w1',
        'llm.input_messages.3.message.content': '{"temp_c": 18, "sky": "sunny"}',
        'llm.input_messages.4.message.role': 'tool',
        'llm.input_messages.4.message.tool_call_id': 'call_t1',
        'llm.input_messages.4.message.content': '14:05',
        'llm.output_messages.0.message.role': 'assistant',
        'llm.output_messages.0.message.content': ANSWER,
      },
    }),
  ];
}

describe('OpenInference', () => {
  it('reads the §3.3 run into the golden trajectory', () => {
    const { record, summary } = normalizeTrace(shuffled(section33()));
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'travel-helper', input: QUESTION, output: ANSWER },
      {
        type: 'llm',
        name: 'ChatCompletion',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [OI_CALLS],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160 },
      },
      {
        type: 'tool',
        name: 'get_weather',
        input: '{"city": "Paris"}',
        output: { temp_c: 18, sky: 'sunny' },
      },
      { type: 'tool', name: 'get_time', input: '{"tz": "Europe/Paris"}', output: '14:05' },
      {
        type: 'llm',
        name: 'ChatCompletion',
        model: 'gpt-4o-2024-08-06',
        input: [
          SYSTEM,
          USER,
          OI_CALLS,
          { role: 'tool', toolCallId: 'call_w1', content: { temp_c: 18, sky: 'sunny' } },
          { role: 'tool', toolCallId: 'call_t1', content: '14:05' },
        ],
        output: [FINAL],
        usage: { inputTokens: 210, outputTokens: 25, totalTokens: 235 },
      },
    ]);
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
    expect(record.usage).toMatchObject({ inputTokens: 330, outputTokens: 65, totalTokens: 395 });
    expect(record.metadata).toMatchObject({ sessionId: 'conv-42', userId: 'u-7' });
    expect(record.labels).toEqual({ team: 'travel' });
    expect(summary.labels).toEqual({ team: 'travel' });
    expect(RecordSchema.safeParse(record).success).toBe(true);
  });

  it('reads an OpenAI Agents handoff (a TOOL named "handoff to …") as a handoff step', () => {
    const { record } = normalizeTrace([
      span('Agent workflow', { start: 0, end: 100, attrs: { 'openinference.span.kind': 'AGENT' } }),
      span('handoff to billing', {
        parent: 'Agent workflow',
        start: 10,
        end: 11,
        attrs: {
          'openinference.span.kind': 'TOOL',
          'tool.name': 'transfer_to_billing',
          'input.value': 'triage',
          'output.value': 'billing',
        },
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'Agent workflow' },
      { type: 'handoff', name: 'handoff to billing', input: 'triage', output: 'billing' },
    ]);
  });

  it('collapses a framework LLM span wrapping a provider LLM span into one step (§11.3)', () => {
    const { record } = normalizeTrace([
      span('agent', { start: 0, end: 1000, attrs: { 'openinference.span.kind': 'AGENT' } }),
      span('response', {
        parent: 'agent',
        start: 10,
        end: 900,
        attrs: {
          'openinference.span.kind': 'LLM',
          ...history,
          'llm.token_count.prompt': 120,
          'llm.token_count.completion': 40,
        },
      }),
      span('ChatCompletion', {
        parent: 'response',
        start: 20,
        end: 880,
        attrs: {
          'openinference.span.kind': 'LLM',
          'llm.model_name': 'gpt-4o-2024-08-06',
          'llm.output_messages.0.message.role': 'assistant',
          'llm.output_messages.0.message.content': ANSWER,
          'llm.token_count.prompt': 120,
          'llm.token_count.completion': 40,
        },
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'agent' },
      {
        type: 'llm',
        name: 'ChatCompletion',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [FINAL],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160 },
      },
    ]);
    expect(record.usage).toMatchObject({ inputTokens: 120, outputTokens: 40, totalTokens: 160 });
  });

  it('reads retrieval documents into the step output and the record context', () => {
    const { record } = normalizeTrace([
      span('rag', { start: 0, end: 100, attrs: { 'openinference.span.kind': 'CHAIN' } }),
      span('VectorStoreRetriever', {
        parent: 'rag',
        start: 1,
        end: 5,
        attrs: {
          'openinference.span.kind': 'RETRIEVER',
          'input.value': 'weather in Paris',
          'retrieval.documents.0.document.id': 'd1',
          'retrieval.documents.0.document.content': 'Paris is sunny in May.',
          'retrieval.documents.0.document.score': 0.9,
          'retrieval.documents.1.document.content': 'Paris has a metro.',
          'retrieval.documents.1.document.metadata': json({ source: 'wiki' }),
        },
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'rag' },
      {
        type: 'retrieval',
        name: 'VectorStoreRetriever',
        input: 'weather in Paris',
        output: [
          { id: 'd1', content: 'Paris is sunny in May.', score: 0.9 },
          { content: 'Paris has a metro.', metadata: { source: 'wiki' } },
        ],
      },
    ]);
    expect(record.context).toEqual(['Paris is sunny in May.', 'Paris has a metro.']);
  });
});
