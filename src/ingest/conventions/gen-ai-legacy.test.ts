import { describe, expect, it } from 'vitest';
import { normalizeTrace } from './index.js';
import { ANSWER, json, QUESTION, SYSTEM, span, stable, USER } from './spans.testkit.js';

const RAW_CALLS = [
  {
    id: 'call_w1',
    type: 'function',
    function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
  },
  {
    id: 'call_t1',
    type: 'function',
    function: { name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
  },
];
const CALLS = {
  role: 'assistant',
  toolCalls: [
    { id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { id: 'call_t1', name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
  ],
};

describe('OTel GenAI legacy forms (§2)', () => {
  it('reads per-message span events of call 1, in event time order, and the old token names', () => {
    const { record } = normalizeTrace([
      span('chat gpt-4o', {
        kind: 3,
        start: 10,
        end: 900,
        attrs: {
          'gen_ai.system': 'openai',
          'gen_ai.request.model': 'gpt-4o',
          'gen_ai.usage.prompt_tokens': 120,
          'gen_ai.usage.completion_tokens': 40,
        },
        events: [
          // Arrival order differs from time order: time wins.
          { name: 'gen_ai.user.message', at: 12, attrs: { content: QUESTION } },
          { name: 'gen_ai.system.message', at: 11, attrs: { content: 'You are a travel helper.' } },
          {
            name: 'gen_ai.choice',
            at: 899,
            attrs: {
              index: 0,
              finish_reason: 'tool_calls',
              message: { role: 'assistant', tool_calls: RAW_CALLS },
            },
          },
        ],
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      {
        type: 'llm',
        name: 'chat gpt-4o',
        model: 'gpt-4o',
        input: [SYSTEM, USER],
        output: [CALLS],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160 },
      },
    ]);
  });

  it('reads tool and assistant history events and a JSON-string choice message', () => {
    const { record } = normalizeTrace([
      span('chat', {
        start: 0,
        end: 10,
        attrs: { 'gen_ai.operation.name': 'chat' },
        events: [
          { name: 'gen_ai.user.message', attrs: { content: QUESTION } },
          { name: 'gen_ai.assistant.message', attrs: { tool_calls: json(RAW_CALLS) } },
          { name: 'gen_ai.tool.message', attrs: { id: 'call_w1', content: '{"temp_c":18}' } },
          { name: 'gen_ai.choice', attrs: { index: 0, message: json({ content: ANSWER }) } },
        ],
      }),
    ]);
    expect(record.trajectory?.[0]).toMatchObject({
      input: [USER, CALLS, { role: 'tool', toolCallId: 'call_w1', content: { temp_c: 18 } }],
      output: [{ role: 'assistant', content: ANSWER }],
    });
  });

  it('reads gen_ai.content.prompt / completion events, Python repr included', () => {
    const { record } = normalizeTrace([
      span('chat', {
        start: 0,
        end: 10,
        attrs: { 'gen_ai.system': 'az.ai.openai' },
        events: [
          {
            name: 'gen_ai.content.prompt',
            attrs: { 'gen_ai.prompt': `[{'role': 'user', 'content': '${QUESTION}'}]` },
          },
          { name: 'gen_ai.content.completion', attrs: { 'gen_ai.completion': ANSWER } },
        ],
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      {
        type: 'llm',
        name: 'chat',
        input: [USER],
        output: [{ role: 'assistant', content: ANSWER }],
      },
    ]);
  });

  it('prefers the current message attributes over the events on one span', () => {
    const { record } = normalizeTrace([
      span('chat', {
        start: 0,
        end: 10,
        attrs: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.input.messages': json([
            { role: 'user', parts: [{ type: 'text', content: 'current' }] },
          ]),
        },
        events: [{ name: 'gen_ai.user.message', attrs: { content: 'legacy' } }],
      }),
    ]);
    expect(record.trajectory?.[0]?.input).toEqual([{ role: 'user', content: 'current' }]);
  });

  it('reads no message from events without content (capture off, or an empty model reply)', () => {
    const { record } = normalizeTrace([
      span('chat', {
        start: 0,
        end: 10,
        attrs: { 'gen_ai.operation.name': 'chat', 'gen_ai.system': 'openai' },
        events: [
          { name: 'gen_ai.user.message', attrs: {} },
          { name: 'gen_ai.tool.message', attrs: { id: 'call_w1' } },
          // What opentelemetry-instrumentation-openai-v2 sends for `content: null, tool_calls: []`.
          {
            name: 'gen_ai.choice',
            attrs: { index: 0, finish_reason: 'stop', message: { role: 'assistant' } },
          },
        ],
      }),
    ]);
    expect(record.trajectory?.[0]?.input).toBeUndefined();
    expect(record.trajectory?.[0]?.output).toBeUndefined();
    expect(record.output).toBeUndefined();
  });
});
