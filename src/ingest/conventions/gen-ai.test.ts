import { describe, expect, it } from 'vitest';
import { RecordSchema } from '../../core/index.js';
import { normalizeTrace } from './index.js';
import {
  ANSWER,
  CALLS,
  FINAL,
  json,
  QUESTION,
  SYSTEM,
  shuffled,
  span,
  stable,
  TRACE_ID,
  USER,
} from './spans.testkit.js';

const CALL_PARTS = [
  { type: 'tool_call', id: 'call_w1', name: 'get_weather', arguments: { city: 'Paris' } },
  { type: 'tool_call', id: 'call_t1', name: 'get_time', arguments: { tz: 'Europe/Paris' } },
];

/** Conventions reference §1.5: the two-tool agent run in the current GenAI form. */
function section15() {
  return [
    span('invoke_agent travel-helper', {
      start: 0,
      end: 2400,
      attrs: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.provider.name': 'openai',
        'gen_ai.agent.name': 'travel-helper',
        'gen_ai.conversation.id': 'conv-42',
        'gen_ai.input.messages': json([
          { role: 'user', parts: [{ type: 'text', content: QUESTION }] },
        ]),
        'gen_ai.output.messages': json([
          { role: 'assistant', finish_reason: 'stop', parts: [{ type: 'text', content: ANSWER }] },
        ]),
      },
    }),
    span('chat gpt-4o', {
      id: 'chat1',
      parent: 'invoke_agent travel-helper',
      kind: 3,
      start: 10,
      end: 900,
      attrs: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.response.model': 'gpt-4o-2024-08-06',
        'gen_ai.response.id': 'chatcmpl-1',
        'gen_ai.response.finish_reasons': ['tool_calls'],
        'gen_ai.usage.input_tokens': 120,
        'gen_ai.usage.output_tokens': 40,
        'gen_ai.system_instructions': json([{ type: 'text', content: 'You are a travel helper.' }]),
        'gen_ai.input.messages': json([
          { role: 'user', parts: [{ type: 'text', content: QUESTION }] },
        ]),
        'gen_ai.output.messages': json([
          { role: 'assistant', finish_reason: 'tool_call', parts: CALL_PARTS },
        ]),
      },
    }),
    span('execute_tool get_weather', {
      parent: 'invoke_agent travel-helper',
      start: 910,
      end: 1100,
      attrs: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'get_weather',
        'gen_ai.tool.call.id': 'call_w1',
        'gen_ai.tool.type': 'function',
        'gen_ai.tool.call.arguments': '{"city":"Paris"}',
        'gen_ai.tool.call.result': '{"temp_c":18,"sky":"sunny"}',
      },
    }),
    span('execute_tool get_time', {
      parent: 'invoke_agent travel-helper',
      start: 1110,
      end: 1200,
      attrs: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'get_time',
        'gen_ai.tool.call.id': 'call_t1',
        'gen_ai.tool.call.arguments': json({ tz: 'Europe/Paris' }),
        'gen_ai.tool.call.result': json('14:05'),
      },
    }),
    span('chat gpt-4o', {
      id: 'chat2',
      parent: 'invoke_agent travel-helper',
      kind: 3,
      start: 1210,
      end: 2390,
      attrs: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': 210,
        'gen_ai.usage.output_tokens': 25,
        'gen_ai.response.finish_reasons': ['stop'],
        'gen_ai.input.messages': json([
          { role: 'user', parts: [{ type: 'text', content: QUESTION }] },
          { role: 'assistant', parts: CALL_PARTS },
          {
            role: 'tool',
            parts: [
              { type: 'tool_call_response', id: 'call_w1', response: { temp_c: 18, sky: 'sunny' } },
            ],
          },
          {
            role: 'tool',
            parts: [{ type: 'tool_call_response', id: 'call_t1', response: '14:05' }],
          },
        ]),
        'gen_ai.output.messages': json([
          { role: 'assistant', finish_reason: 'stop', parts: [{ type: 'text', content: ANSWER }] },
        ]),
      },
    }),
  ];
}

const TOOL_W = { role: 'tool', toolCallId: 'call_w1', content: { temp_c: 18, sky: 'sunny' } };
const TOOL_T = { role: 'tool', toolCallId: 'call_t1', content: '14:05' };

describe('OTel GenAI (current)', () => {
  it('reads the §1.5 run into the golden trajectory', () => {
    const { record, summary } = normalizeTrace(shuffled(section15()));
    expect(record.trajectory?.map(stable)).toEqual(
      [
        { type: 'agent', name: 'travel-helper', input: QUESTION, output: ANSWER },
        {
          type: 'llm',
          name: 'chat gpt-4o',
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
          name: 'chat gpt-4o',
          model: 'gpt-4o',
          input: [USER, CALLS, TOOL_W, TOOL_T],
          output: [FINAL],
          usage: { inputTokens: 210, outputTokens: 25, totalTokens: 235 },
        },
      ].map((s) => JSON.parse(JSON.stringify(s))),
    );
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
    expect(record.usage).toEqual({
      inputTokens: 330,
      outputTokens: 65,
      totalTokens: 395,
      latencyMs: 2400,
    });
    expect(record.metadata).toMatchObject({
      service: 'travel-app',
      sessionId: 'conv-42',
      models: ['gpt-4o-2024-08-06', 'gpt-4o'],
      tools: ['get_weather', 'get_time'],
    });
    expect(record.id).toBe(TRACE_ID);
    expect(summary).toMatchObject({
      traceId: TRACE_ID,
      service: 'travel-app',
      name: 'invoke_agent travel-helper',
      startTime: '2026-01-01T00:00:00.000Z',
      durationMs: 2400,
      steps: 5,
      error: false,
    });
    expect(RecordSchema.safeParse(record).success).toBe(true);
  });
});
