import { describe, expect, it } from 'vitest';
import { RecordSchema } from '../../core/index.js';
import { normalizeTrace } from './index.js';
import {
  ANSWER,
  FINAL,
  mlflowValue as m,
  QUESTION,
  SYSTEM,
  shuffled,
  span,
  stable,
  USER,
} from './spans.testkit.js';

const REQUEST_ID = 'tr-4bf92f3577b34da6a3ce929d0e0e4736';

const openAiCalls = [
  {
    id: 'call_w1',
    type: 'function',
    function: { name: 'get_weather', arguments: '{"city": "Paris"}' },
  },
  {
    id: 'call_t1',
    type: 'function',
    function: { name: 'get_time', arguments: '{"tz": "Europe/Paris"}' },
  },
];
const CALLS = {
  role: 'assistant',
  toolCalls: [
    { id: 'call_w1', name: 'get_weather', arguments: '{"city": "Paris"}' },
    { id: 'call_t1', name: 'get_time', arguments: '{"tz": "Europe/Paris"}' },
  ],
};
const requestMessages = [
  { role: 'system', content: 'You are a travel helper.' },
  { role: 'user', content: QUESTION },
];

/** Conventions reference §4.3: `@mlflow.trace` agent + OpenAI autolog, default export mode. */
function section43() {
  return [
    span('travel_helper', {
      start: 0,
      end: 2400,
      attrs: {
        'mlflow.traceRequestId': m(REQUEST_ID),
        'mlflow.spanType': m('AGENT'),
        'mlflow.spanFunctionName': m('travel_helper'),
        'mlflow.spanInputs': m({ question: QUESTION }),
        'mlflow.spanOutputs': m(ANSWER),
        'session.id': 'conv-42',
        'user.id': 'u-7',
        'mlflow.traceTag.touchstone.label.env': m('prod'),
      },
    }),
    span('Completions', {
      id: 'c1',
      parent: 'travel_helper',
      start: 10,
      end: 900,
      attrs: {
        'mlflow.spanType': m('CHAT_MODEL'),
        'mlflow.message.format': m('openai'),
        'mlflow.spanInputs': m({ model: 'gpt-4o', messages: requestMessages, tools: [] }),
        'mlflow.spanOutputs': m({
          id: 'chatcmpl-1',
          model: 'gpt-4o-2024-08-06',
          choices: [
            {
              index: 0,
              finish_reason: 'tool_calls',
              message: { role: 'assistant', content: null, tool_calls: openAiCalls },
            },
          ],
          usage: { prompt_tokens: 120, completion_tokens: 40, total_tokens: 160 },
        }),
        'mlflow.chat.tokenUsage': m({ input_tokens: 120, output_tokens: 40, total_tokens: 160 }),
      },
    }),
    span('get_weather', {
      parent: 'travel_helper',
      start: 910,
      end: 1100,
      attrs: {
        'mlflow.spanType': m('TOOL'),
        'mlflow.spanInputs': m({ city: 'Paris' }),
        'mlflow.spanOutputs': m({ temp_c: 18, sky: 'sunny' }),
      },
    }),
    span('get_time', {
      parent: 'travel_helper',
      start: 1110,
      end: 1200,
      attrs: {
        'mlflow.spanType': m('TOOL'),
        'mlflow.spanInputs': m({ tz: 'Europe/Paris' }),
        'mlflow.spanOutputs': m('14:05'),
      },
    }),
    span('Completions', {
      id: 'c2',
      parent: 'travel_helper',
      start: 1210,
      end: 2390,
      attrs: {
        'mlflow.spanType': m('CHAT_MODEL'),
        'mlflow.message.format': m('openai'),
        'mlflow.spanInputs': m({
          model: 'gpt-4o',
          messages: [
            ...requestMessages,
            { role: 'assistant', content: null, tool_calls: openAiCalls },
            { role: 'tool', tool_call_id: 'call_w1', content: '{"temp_c": 18, "sky": "sunny"}' },
            { role: 'tool', tool_call_id: 'call_t1', content: '14:05' },
          ],
        }),
        'mlflow.spanOutputs': m({
          model: 'gpt-4o-2024-08-06',
          choices: [
            { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: ANSWER } },
          ],
        }),
        'mlflow.chat.tokenUsage': m({ input_tokens: 210, output_tokens: 25, total_tokens: 235 }),
        'mlflow.llm.cost': m({ input_cost: 0.0005, output_cost: 0.00025, total_cost: 0.00075 }),
      },
    }),
  ];
}

describe('MLflow', () => {
  it('reads the §4.3 run (every value JSON-encoded) into the golden trajectory', () => {
    const { record } = normalizeTrace(shuffled(section43()));
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'travel_helper', input: QUESTION, output: ANSWER },
      {
        type: 'llm',
        name: 'Completions',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [CALLS],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160 },
      },
      // The raw `mlflow.spanInputs` text (compact here because this test encodes with JSON.stringify).
      {
        type: 'tool',
        name: 'get_weather',
        input: '{"city":"Paris"}',
        output: { temp_c: 18, sky: 'sunny' },
      },
      { type: 'tool', name: 'get_time', input: '{"tz":"Europe/Paris"}', output: '14:05' },
      {
        type: 'llm',
        name: 'Completions',
        model: 'gpt-4o-2024-08-06',
        input: [
          SYSTEM,
          USER,
          CALLS,
          { role: 'tool', toolCallId: 'call_w1', content: { temp_c: 18, sky: 'sunny' } },
          { role: 'tool', toolCallId: 'call_t1', content: '14:05' },
        ],
        output: [FINAL],
        usage: { inputTokens: 210, outputTokens: 25, totalTokens: 235, costUsd: 0.00075 },
      },
    ]);
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
    expect(record.usage).toMatchObject({
      inputTokens: 330,
      outputTokens: 65,
      totalTokens: 395,
      costUsd: 0.00075,
    });
    expect(record.metadata).toMatchObject({ sessionId: 'conv-42', userId: 'u-7' });
    expect(record.labels).toEqual({ env: 'prod' });
    expect(RecordSchema.safeParse(record).success).toBe(true);
  });

  it('reads usage from the response payload when mlflow.chat.tokenUsage is absent', () => {
    const spans = section43().map((s) => {
      const { 'mlflow.chat.tokenUsage': _, ...attributes } = s.attributes;
      return { ...s, attributes };
    });
    const { record } = normalizeTrace(spans);
    expect(record.trajectory?.[1]?.usage).toEqual({
      inputTokens: 120,
      outputTokens: 40,
      totalTokens: 160,
    });
  });

  it('splits the ≤ 3.2 mlflow.chat.messages list into input and output', () => {
    const { record } = normalizeTrace([
      span('chat', {
        start: 0,
        end: 10,
        attrs: {
          'mlflow.spanType': m('CHAT_MODEL'),
          'mlflow.chat.messages': m([...requestMessages, { role: 'assistant', content: ANSWER }]),
        },
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'llm', name: 'chat', input: [SYSTEM, USER], output: [FINAL] },
    ]);
  });
});
