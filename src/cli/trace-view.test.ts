import { describe, expect, it } from 'vitest';
import type { EvalRecord, TraceSummary } from '../core/index.js';
import { excerpt, traceView } from './trace-view.js';

const TRACE: TraceSummary = {
  traceId: '492d148b3a0d6d344cb44a7fb5f0cb86',
  service: 'travel',
  name: 'invoke_agent planner',
  startTime: '2026-01-02T10:00:00.000Z',
  durationMs: 6200,
  steps: 5,
  error: true,
  labels: { workflow: 'travel' },
};

const at = (ms: number) => new Date(Date.parse('2026-01-02T10:00:00.000Z') + ms).toISOString();

const RECORD: EvalRecord = {
  id: 'r1',
  input: 'Find me a hotel in Rome',
  output: 'Sorry, the hotel search is not answering.',
  usage: { inputTokens: 294, outputTokens: 54, costUsd: 0.0012 },
  trajectory: [
    {
      type: 'agent',
      name: 'planner',
      spanId: 'a',
      start: at(0),
      end: at(6200),
      input: 'Find me a hotel in Rome',
      output: 'Sorry, the hotel search is not answering.',
      error: '',
    },
    {
      type: 'llm',
      name: 'chat',
      model: 'gpt-4o-mini',
      spanId: 'b',
      parentSpanId: 'a',
      start: at(0),
      end: at(600),
      input: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Find me a hotel in Rome' },
      ],
      output: [
        {
          role: 'assistant',
          toolCalls: [{ id: 'c1', name: 'search_hotels', arguments: '{"city":"Rome"}' }],
        },
      ],
      error: '',
    },
    {
      type: 'agent',
      name: 'booker',
      spanId: 'c',
      parentSpanId: 'a',
      start: at(600),
      end: at(5600),
      error: '',
    },
    {
      type: 'tool',
      name: 'search_hotels',
      spanId: 'd',
      parentSpanId: 'c',
      start: at(600),
      end: at(5600),
      input: '{"city":"Rome"}',
      error: 'timed out\nafter 5 s',
    },
    // A step whose parent is not a step (a span of no convention) is a root of its own.
    { type: 'generic', name: 'cleanup', spanId: 'e', parentSpanId: 'zz', error: '' },
  ],
};

describe('traceView', () => {
  it('draws the trajectory as a tree with type, name, duration, error and one-line excerpts', () => {
    expect(traceView({ trace: TRACE, record: RECORD }).split('\n')).toEqual([
      'trace 492d148b3a0d6d344cb44a7fb5f0cb86  ERROR',
      '  travel / invoke_agent planner  started 2026-01-02T10:00:00.000Z  took 6.200s  5 step(s)',
      '  labels: workflow=travel',
      '  input:  Find me a hotel in Rome',
      '  output: Sorry, the hotel search is not answering.',
      '  usage:  294 in / 54 out tokens, $0.0012',
      '',
      'trajectory:',
      '├─ agent     planner  6.200s',
      '│  │  in:  Find me a hotel in Rome',
      '│  │  out: Sorry, the hotel search is not answering.',
      '│  ├─ llm       chat (gpt-4o-mini)  0.600s',
      '│  │     in:  [2 messages] user: Find me a hotel in Rome',
      '│  │     out: assistant: calls search_hotels({"city":"Rome"})',
      '│  └─ agent     booker  5.000s',
      '│     │  in:  -',
      '│     │  out: -',
      '│     └─ tool      search_hotels  5.000s  ERROR timed out after 5 s',
      '│           in:  {"city":"Rome"}',
      '│           out: -',
      '└─ generic   cleanup  -',
      '      in:  -',
      '      out: -',
    ]);
  });

  it('says so when there are no steps', () => {
    const view = traceView({
      trace: { ...TRACE, error: false, labels: {}, steps: 0 },
      record: { id: 'r2', input: 'hi', output: 'hello' },
    });
    expect(view).toContain('\nno steps');
    expect(view).not.toContain('ERROR');
    expect(view).not.toContain('labels:');
    expect(view).not.toContain('usage:');
  });
});

describe('excerpt', () => {
  it('keeps one line of at most 100 characters', () => {
    expect(excerpt(`a\n\n  b ${'x'.repeat(200)}`)).toBe(`a b ${'x'.repeat(95)}…`);
    expect(excerpt(`${'y'.repeat(100)}`)).toBe('y'.repeat(100));
    expect(excerpt({ k: [1, 2] })).toBe('{"k":[1,2]}');
    expect(excerpt(undefined)).toBe('-');
    expect(excerpt('')).toBe('-');
    expect(excerpt([{ role: 'assistant', content: [{ type: 'image' }] }])).toBe(
      'assistant: [{"type":"image"}]',
    );
  });
});
