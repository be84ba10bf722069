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

const PROPS = 'traceloop.association.properties';

const CALLS = {
  role: 'assistant',
  toolCalls: [
    { id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { id: 'call_t1', name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
  ],
};

const prompts = {
  'gen_ai.prompt.0.role': 'system',
  'gen_ai.prompt.0.content': 'You are a travel helper.',
  'gen_ai.prompt.1.role': 'user',
  'gen_ai.prompt.1.content': QUESTION,
};

/** Conventions reference §5.3: Traceloop SDK decorators + OpenAI instrumentation, legacy form. */
function section53() {
  return [
    span('travel_helper.agent', {
      start: 0,
      end: 2400,
      attrs: {
        'traceloop.span.kind': 'agent',
        'traceloop.entity.name': 'travel_helper',
        'gen_ai.agent.name': 'travel_helper',
        'traceloop.entity.input': json({ args: [QUESTION], kwargs: {} }),
        'traceloop.entity.output': json(ANSWER),
        [`${PROPS}.session_id`]: 'conv-42',
        [`${PROPS}.user_id`]: 'u-7',
        [`${PROPS}.touchstone.label.tier`]: 'gold',
      },
    }),
    span('openai.chat', {
      id: 'chat1',
      parent: 'travel_helper.agent',
      kind: 3,
      start: 10,
      end: 900,
      attrs: {
        'llm.request.type': 'chat',
        'gen_ai.system': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.response.model': 'gpt-4o-2024-08-06',
        ...prompts,
        'gen_ai.completion.0.role': 'assistant',
        'gen_ai.completion.0.finish_reason': 'tool_calls',
        'gen_ai.completion.0.tool_calls.0.id': 'call_w1',
        'gen_ai.completion.0.tool_calls.0.name': 'get_weather',
        'gen_ai.completion.0.tool_calls.0.arguments': '{"city":"Paris"}',
        'gen_ai.completion.0.tool_calls.1.id': 'call_t1',
        'gen_ai.completion.0.tool_calls.1.name': 'get_time',
        'gen_ai.completion.0.tool_calls.1.arguments': '{"tz":"Europe/Paris"}',
        'llm.request.functions.0.name': 'get_weather',
        'gen_ai.usage.prompt_tokens': 120,
        'gen_ai.usage.completion_tokens': 40,
        'llm.usage.total_tokens': 160,
      },
    }),
    span('get_weather.tool', {
      parent: 'travel_helper.agent',
      start: 910,
      end: 1100,
      attrs: {
        'traceloop.span.kind': 'tool',
        'traceloop.entity.name': 'get_weather',
        'gen_ai.tool.name': 'get_weather',
        'traceloop.entity.input': json({ args: [], kwargs: { city: 'Paris' } }),
        'traceloop.entity.output': json({ temp_c: 18, sky: 'sunny' }),
      },
    }),
    span('get_time.tool', {
      parent: 'travel_helper.agent',
      start: 1110,
      end: 1200,
      attrs: {
        'traceloop.span.kind': 'tool',
        'traceloop.entity.name': 'get_time',
        'traceloop.entity.input': json({ args: [], kwargs: { tz: 'Europe/Paris' } }),
        'traceloop.entity.output': json('14:05'),
      },
    }),
    span('openai.chat', {
      id: 'chat2',
      parent: 'travel_helper.agent',
      kind: 3,
      start: 1210,
      end: 2390,
      attrs: {
        'llm.request.type': 'chat',
        'gen_ai.system': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        ...prompts,
        'gen_ai.prompt.2.role': 'assistant',
        'gen_ai.prompt.2.tool_calls.0.id': 'call_w1',
        'gen_ai.prompt.2.tool_calls.0.name': 'get_weather',
        'gen_ai.prompt.2.tool_calls.0.arguments': '{"city":"Paris"}',
        'gen_ai.prompt.2.tool_calls.1.id': 'call_t1',
        'gen_ai.prompt.2.tool_calls.1.name': 'get_time',
        'gen_ai.prompt.2.tool_calls.1.arguments': '{"tz":"Europe/Paris"}',
        'gen_ai.prompt.3.role': 'tool',
        'gen_ai.prompt.3.tool_call_id': 'call_w1',
        'gen_ai.prompt.3.content': '{"temp_c":18,"sky":"sunny"}',
        'gen_ai.prompt.4.role': 'tool',
        'gen_ai.prompt.4.tool_call_id': 'call_t1',
        'gen_ai.prompt.4.content': '14:05',
        'gen_ai.completion.0.role': 'assistant',
        'gen_ai.completion.0.content': ANSWER,
        'gen_ai.completion.0.finish_reason': 'stop',
        'gen_ai.usage.prompt_tokens': 210,
        'gen_ai.usage.completion_tokens': 25,
      },
    }),
  ];
}

describe('OpenLLMetry / Traceloop', () => {
  it('reads the §5.3 run into the golden trajectory', () => {
    const { record } = normalizeTrace(shuffled(section53()));
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'travel_helper', input: QUESTION, output: ANSWER },
      {
        type: 'llm',
        name: 'openai.chat',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [CALLS],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160 },
      },
      {
        type: 'tool',
        name: 'get_weather',
        input: '{"city":"Paris"}',
        output: { temp_c: 18, sky: 'sunny' },
      },
      { type: 'tool', name: 'get_time', input: '{"tz":"Europe/Paris"}', output: '14:05' },
      {
        type: 'llm',
        name: 'openai.chat',
        model: 'gpt-4o',
        input: [
          SYSTEM,
          USER,
          CALLS,
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
    expect(record.labels).toEqual({ tier: 'gold' });
    expect(RecordSchema.safeParse(record).success).toBe(true);
  });

  it('never adds legacy and current token names for one count', () => {
    const { record } = normalizeTrace([
      span('openai.chat', {
        start: 0,
        end: 10,
        attrs: {
          'llm.request.type': 'chat',
          'gen_ai.usage.prompt_tokens': 120,
          'gen_ai.usage.input_tokens': 120,
          'gen_ai.usage.completion_tokens': 40,
          'gen_ai.usage.output_tokens': 40,
        },
      }),
    ]);
    expect(record.usage).toMatchObject({ inputTokens: 120, outputTokens: 40, totalTokens: 160 });
  });
});
