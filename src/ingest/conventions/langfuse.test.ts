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

const OBS = 'langfuse.observation';

const CALLS = {
  role: 'assistant',
  toolCalls: [
    { id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { id: 'call_t1', name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
  ],
};
const openAiCalls = [
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
const request = [
  { role: 'system', content: 'You are a travel helper.' },
  { role: 'user', content: QUESTION },
];

/** Conventions reference §7.3: `@observe` decorators with `as_type`, plus explicit generations. */
function section73() {
  return [
    span('travel_helper', {
      start: 0,
      end: 2400,
      attrs: {
        [`${OBS}.type`]: 'agent',
        'langfuse.trace.name': 'travel_helper',
        'session.id': 'conv-42',
        'user.id': 'u-7',
        'langfuse.trace.tags': ['travel'],
        'langfuse.trace.metadata.env': 'prod',
        'langfuse.trace.metadata.touchstone.label.tier': 'gold',
        [`${OBS}.input`]: json({ args: [QUESTION], kwargs: {} }),
        [`${OBS}.output`]: ANSWER,
      },
    }),
    span('llm-call', {
      id: 'g1',
      parent: 'travel_helper',
      start: 10,
      end: 900,
      attrs: {
        [`${OBS}.type`]: 'generation',
        [`${OBS}.model.name`]: 'gpt-4o-2024-08-06',
        [`${OBS}.model.parameters`]: json({ temperature: '0' }),
        [`${OBS}.input`]: json(request),
        [`${OBS}.output`]: json({ role: 'assistant', content: null, tool_calls: openAiCalls }),
        [`${OBS}.usage_details`]: json({ input: 120, output: 40, total: 160 }),
        [`${OBS}.cost_details`]: json({ input: 0.0003, output: 0.0004, total: 0.0007 }),
      },
    }),
    span('get_weather', {
      parent: 'travel_helper',
      start: 910,
      end: 1100,
      attrs: {
        [`${OBS}.type`]: 'tool',
        [`${OBS}.input`]: json({ args: [], kwargs: { city: 'Paris' } }),
        [`${OBS}.output`]: json({ temp_c: 18, sky: 'sunny' }),
      },
    }),
    span('get_time', {
      parent: 'travel_helper',
      start: 1110,
      end: 1200,
      attrs: {
        [`${OBS}.type`]: 'tool',
        [`${OBS}.input`]: json({ args: [], kwargs: { tz: 'Europe/Paris' } }),
        [`${OBS}.output`]: '14:05',
      },
    }),
    span('llm-call', {
      id: 'g2',
      parent: 'travel_helper',
      start: 1210,
      end: 2390,
      attrs: {
        [`${OBS}.type`]: 'generation',
        [`${OBS}.model.name`]: 'gpt-4o-2024-08-06',
        [`${OBS}.input`]: json([
          ...request,
          { role: 'assistant', content: null, tool_calls: openAiCalls },
          { role: 'tool', tool_call_id: 'call_w1', content: '{"temp_c":18,"sky":"sunny"}' },
          { role: 'tool', tool_call_id: 'call_t1', content: '14:05' },
        ]),
        [`${OBS}.output`]: json({ role: 'assistant', content: ANSWER }),
        [`${OBS}.usage_details`]: json({ input: 210, output: 25, total: 235 }),
        [`${OBS}.cost_details`]: json({ total: 0.0005 }),
      },
    }),
  ];
}

describe('Langfuse', () => {
  it('reads the §7.3 run into the golden trajectory, with costs', () => {
    const { record } = normalizeTrace(shuffled(section73()));
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'travel_helper', input: QUESTION, output: ANSWER },
      {
        type: 'llm',
        name: 'llm-call',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [CALLS],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160, costUsd: 0.0007 },
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
        name: 'llm-call',
        model: 'gpt-4o-2024-08-06',
        input: [
          SYSTEM,
          USER,
          CALLS,
          { role: 'tool', toolCallId: 'call_w1', content: { temp_c: 18, sky: 'sunny' } },
          { role: 'tool', toolCallId: 'call_t1', content: '14:05' },
        ],
        output: [FINAL],
        usage: { inputTokens: 210, outputTokens: 25, totalTokens: 235, costUsd: 0.0005 },
      },
    ]);
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
    expect(record.usage).toMatchObject({
      inputTokens: 330,
      outputTokens: 65,
      totalTokens: 395,
      costUsd: 0.0012,
    });
    expect(record.metadata).toMatchObject({ sessionId: 'conv-42', userId: 'u-7' });
    expect(record.labels).toEqual({ tier: 'gold' });
    expect(RecordSchema.safeParse(record).success).toBe(true);
  });

  it('prefers trace-level input/output for the record and reads level ERROR as an error', () => {
    const { record, summary } = normalizeTrace([
      span('root', {
        start: 0,
        end: 10,
        attrs: {
          [`${OBS}.type`]: 'span',
          [`${OBS}.input`]: 'internal input',
          'langfuse.trace.input': json({ question: QUESTION }),
          'langfuse.trace.output': ANSWER,
        },
      }),
      span('lookup', {
        parent: 'root',
        start: 1,
        end: 2,
        attrs: {
          [`${OBS}.type`]: 'tool',
          [`${OBS}.level`]: 'ERROR',
          [`${OBS}.status_message`]: 'lookup failed',
        },
      }),
    ]);
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'root', input: 'internal input' },
      { type: 'tool', name: 'lookup', error: 'lookup failed' },
    ]);
    expect(summary.error).toBe(true);
  });
});
