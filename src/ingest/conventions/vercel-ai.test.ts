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
  USER,
} from './spans.testkit.js';

const promptMessages = [
  { role: 'system', content: 'You are a travel helper.' },
  { role: 'user', content: [{ type: 'text', text: QUESTION }] },
];

/** Conventions reference §6.4: legacy `ai.*` spans of a generateText call. */
function section64() {
  return [
    span('ai.generateText', {
      start: 0,
      end: 2400,
      scope: 'ai',
      attrs: {
        'ai.operationId': 'ai.generateText',
        'operation.name': 'ai.generateText travel-helper',
        'ai.telemetry.functionId': 'travel-helper',
        'ai.model.id': 'gpt-4o',
        'ai.model.provider': 'openai.chat',
        'ai.telemetry.metadata.sessionId': 'conv-42',
        'ai.telemetry.metadata.touchstone.label.feature': 'trip',
        'ai.prompt': json({ system: 'You are a travel helper.', prompt: QUESTION }),
        'ai.response.text': ANSWER,
        'ai.response.finishReason': 'stop',
        'ai.usage.promptTokens': 330,
        'ai.usage.completionTokens': 65,
      },
    }),
    span('ai.generateText.doGenerate', {
      id: 'gen1',
      parent: 'ai.generateText',
      start: 10,
      end: 900,
      scope: 'ai',
      attrs: {
        'ai.operationId': 'ai.generateText.doGenerate',
        'gen_ai.system': 'openai.chat',
        'gen_ai.request.model': 'gpt-4o',
        'ai.prompt.messages': json(promptMessages),
        'ai.prompt.tools': [json({ type: 'function', name: 'get_weather' })],
        'ai.response.toolCalls': json([
          { toolCallId: 'call_w1', toolName: 'get_weather', input: '{"city":"Paris"}' },
          { toolCallId: 'call_t1', toolName: 'get_time', input: '{"tz":"Europe/Paris"}' },
        ]),
        'ai.response.finishReason': 'tool-calls',
        'ai.response.model': 'gpt-4o-2024-08-06',
        'ai.usage.promptTokens': 120,
        'ai.usage.completionTokens': 40,
        'gen_ai.usage.input_tokens': 120,
        'gen_ai.usage.output_tokens': 40,
      },
    }),
    span('ai.toolCall', {
      id: 'tool1',
      parent: 'ai.generateText',
      start: 910,
      end: 1100,
      scope: 'ai',
      attrs: {
        'ai.operationId': 'ai.toolCall',
        'ai.toolCall.name': 'get_weather',
        'ai.toolCall.id': 'call_w1',
        'ai.toolCall.args': '{"city":"Paris"}',
        'ai.toolCall.result': '{"temp_c":18,"sky":"sunny"}',
      },
    }),
    span('ai.toolCall', {
      id: 'tool2',
      parent: 'ai.generateText',
      start: 1110,
      end: 1200,
      scope: 'ai',
      attrs: {
        'ai.operationId': 'ai.toolCall',
        'ai.toolCall.name': 'get_time',
        'ai.toolCall.id': 'call_t1',
        'ai.toolCall.args': '{"tz":"Europe/Paris"}',
        'ai.toolCall.result': '"14:05"',
      },
    }),
    span('ai.generateText.doGenerate', {
      id: 'gen2',
      parent: 'ai.generateText',
      start: 1210,
      end: 2390,
      scope: 'ai',
      attrs: {
        'ai.operationId': 'ai.generateText.doGenerate',
        'ai.prompt.messages': json([
          ...promptMessages,
          {
            role: 'assistant',
            content: [
              {
                type: 'tool-call',
                toolCallId: 'call_w1',
                toolName: 'get_weather',
                input: { city: 'Paris' },
              },
              {
                type: 'tool-call',
                toolCallId: 'call_t1',
                toolName: 'get_time',
                input: { tz: 'Europe/Paris' },
              },
            ],
          },
          {
            role: 'tool',
            content: [
              {
                type: 'tool-result',
                toolCallId: 'call_w1',
                toolName: 'get_weather',
                output: { type: 'json', value: { temp_c: 18, sky: 'sunny' } },
              },
              {
                type: 'tool-result',
                toolCallId: 'call_t1',
                toolName: 'get_time',
                output: { type: 'text', value: '14:05' },
              },
            ],
          },
        ]),
        'ai.response.text': ANSWER,
        'ai.response.finishReason': 'stop',
        'ai.usage.promptTokens': 210,
        'ai.usage.completionTokens': 25,
      },
    }),
  ];
}

/** Conventions reference §6.5: v7 GenAI format (`invoke_agent`, `step N`, `chat`, `execute_tool`). */
function section65() {
  const chat = (id: string, parent: string, start: number, end: number, extra: object) =>
    span('chat gpt-4o', {
      id,
      parent,
      kind: 3,
      start,
      end,
      attrs: { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', ...extra },
    });
  const tool = (
    name: string,
    id: string,
    start: number,
    end: number,
    args: object,
    result: unknown,
  ) =>
    span(`execute_tool ${name}`, {
      parent: 'step 1',
      start,
      end,
      attrs: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': name,
        'gen_ai.tool.call.id': id,
        'gen_ai.tool.call.arguments': json(args),
        'gen_ai.tool.call.result': json(result),
      },
    });
  return [
    span('invoke_agent gpt-4o', {
      start: 0,
      end: 2400,
      attrs: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.agent.name': 'travel-helper',
        'gen_ai.system_instructions': json([{ type: 'text', content: 'You are a travel helper.' }]),
        'gen_ai.input.messages': json([
          { role: 'user', parts: [{ type: 'text', content: QUESTION }] },
        ]),
        'gen_ai.output.messages': json([
          { role: 'assistant', finish_reason: 'stop', parts: [{ type: 'text', content: ANSWER }] },
        ]),
        'gen_ai.usage.input_tokens': 330,
        'gen_ai.usage.output_tokens': 65,
      },
    }),
    span('step 1', {
      parent: 'invoke_agent gpt-4o',
      start: 5,
      end: 1205,
      attrs: { 'gen_ai.operation.name': 'agent_step' },
    }),
    chat('chat1', 'step 1', 10, 900, {
      'gen_ai.output.messages': json([
        {
          role: 'assistant',
          finish_reason: 'tool_call',
          parts: [
            { type: 'tool_call', id: 'call_w1', name: 'get_weather', arguments: { city: 'Paris' } },
            {
              type: 'tool_call',
              id: 'call_t1',
              name: 'get_time',
              arguments: { tz: 'Europe/Paris' },
            },
          ],
        },
      ]),
      'gen_ai.usage.input_tokens': 120,
      'gen_ai.usage.output_tokens': 40,
    }),
    tool('get_weather', 'call_w1', 910, 1100, { city: 'Paris' }, { temp_c: 18, sky: 'sunny' }),
    tool('get_time', 'call_t1', 1110, 1200, { tz: 'Europe/Paris' }, '14:05'),
    span('step 2', {
      parent: 'invoke_agent gpt-4o',
      start: 1205,
      end: 2395,
      attrs: { 'gen_ai.operation.name': 'agent_step' },
    }),
    chat('chat2', 'step 2', 1210, 2390, {
      'gen_ai.output.messages': json([
        { role: 'assistant', finish_reason: 'stop', parts: [{ type: 'text', content: ANSWER }] },
      ]),
      'gen_ai.usage.input_tokens': 210,
      'gen_ai.usage.output_tokens': 25,
    }),
  ];
}

describe('Vercel AI SDK', () => {
  it('reads the §6.4 legacy run; the outer call is the agent and its usage is not counted', () => {
    const { record } = normalizeTrace(shuffled(section64()));
    expect(record.trajectory?.map(stable)).toEqual([
      {
        type: 'agent',
        name: 'travel-helper',
        input: QUESTION,
        output: ANSWER,
        usage: { inputTokens: 330, outputTokens: 65, totalTokens: 395 },
      },
      {
        type: 'llm',
        name: 'ai.generateText.doGenerate',
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
        name: 'ai.generateText.doGenerate',
        input: [
          SYSTEM,
          USER,
          CALLS,
          {
            role: 'tool',
            toolCallId: 'call_w1',
            name: 'get_weather',
            content: { temp_c: 18, sky: 'sunny' },
          },
          { role: 'tool', toolCallId: 'call_t1', name: 'get_time', content: '14:05' },
        ],
        output: [FINAL],
        usage: { inputTokens: 210, outputTokens: 25, totalTokens: 235 },
      },
    ]);
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
    expect(record.usage).toMatchObject({ inputTokens: 330, outputTokens: 65, totalTokens: 395 });
    expect(record.metadata).toMatchObject({ sessionId: 'conv-42' });
    expect(record.labels).toEqual({ feature: 'trip' });
    expect(RecordSchema.safeParse(record).success).toBe(true);
  });

  it('reads a lone generateText span (no model-call children) as the llm step', () => {
    const [outer] = section64();
    const { record } = normalizeTrace([outer!]);
    expect(record.trajectory?.map(stable)).toEqual([
      {
        type: 'llm',
        name: 'ai.generateText',
        model: 'gpt-4o',
        input: [SYSTEM, USER],
        output: [FINAL],
        usage: { inputTokens: 330, outputTokens: 65, totalTokens: 395 },
      },
    ]);
  });

  it('reads the §6.5 v7 GenAI run: `step N` containers vanish, agent totals are not counted', () => {
    const { record } = normalizeTrace(shuffled(section65()));
    expect(record.trajectory?.map((s) => [s.type, s.name])).toEqual([
      ['agent', 'travel-helper'],
      ['llm', 'chat gpt-4o'],
      ['tool', 'get_weather'],
      ['tool', 'get_time'],
      ['llm', 'chat gpt-4o'],
    ]);
    // Steps hang off the agent: the `step N` containers are skipped in the parent chain too.
    const agentId = record.trajectory?.[0]?.spanId;
    expect(record.trajectory?.slice(1).every((s) => s.parentSpanId === agentId)).toBe(true);
    expect(record.trajectory?.[2]).toMatchObject({
      input: '{"city":"Paris"}',
      output: { temp_c: 18, sky: 'sunny' },
    });
    expect(record.usage).toMatchObject({ inputTokens: 330, outputTokens: 65, totalTokens: 395 });
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
  });
});
