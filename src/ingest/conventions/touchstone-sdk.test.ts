import { describe, expect, it } from 'vitest';
import { RecordSchema } from '../../core/index.js';
import { normalizeTrace } from './index.js';
import { json, span } from './spans.testkit.js';

/** The one span the Python logging SDK sends per logged record. */
function logged(attrs: Record<string, string>) {
  return span('log', {
    start: 0,
    end: 1,
    attrs: {
      'touchstone.record.input': json({ question: 'Capital of France?' }),
      'touchstone.record.output': json('Paris'),
      ...attrs,
    },
    resource: { 'service.name': 'notebook' },
  });
}

describe('touchstone SDK convention', () => {
  it('fills input, output, reference, context, metadata and labels as sent', () => {
    const { record, summary } = normalizeTrace([
      logged({
        'touchstone.record.reference': json('paris'),
        'touchstone.record.context': json(['France is in Europe.', { page: 3 }]),
        'touchstone.record.metadata': json({ epoch: 3, loss: 'NaN', run: 'r1' }),
        'touchstone.label.split': 'eval',
      }),
    ]);
    expect(RecordSchema.safeParse(record).success).toBe(true);
    expect(record.input).toEqual({ question: 'Capital of France?' });
    expect(record.output).toBe('Paris');
    expect(record.reference).toBe('paris');
    expect(record.context).toEqual(['France is in Europe.', { page: 3 }]);
    expect(record.metadata).toMatchObject({
      epoch: 3,
      loss: 'NaN',
      run: 'r1',
      service: 'notebook',
      conventions: ['touchstone-sdk'],
    });
    expect(record.labels).toEqual({ split: 'eval' });
    // A flat logged record has no trajectory: trajectory evaluators skip it instead of scoring.
    expect(record.trajectory).toEqual([]);
    expect(summary).toMatchObject({ service: 'notebook', name: 'log', steps: 0 });
  });

  it('keeps a string that looks like JSON a string, and a number a number', () => {
    const { record } = normalizeTrace([
      logged({
        'touchstone.record.input': json('{"not": "parsed"}'),
        'touchstone.record.output': json(42),
      }),
    ]);
    expect(record.input).toBe('{"not": "parsed"}');
    expect(record.output).toBe(42);
  });

  it('keeps cut (unparsable) values as text and derived metadata wins a clash', () => {
    const { record } = normalizeTrace([
      logged({
        'touchstone.record.output': '"Paris is the capital…[truncated 10 bytes]',
        'touchstone.record.context': json('one document'),
        'touchstone.record.metadata': json({ service: 'mine', note: 'kept' }),
      }),
    ]);
    expect(record.output).toBe('"Paris is the capital…[truncated 10 bytes]');
    expect(record.context).toEqual(['one document']);
    expect(record.metadata).toMatchObject({ service: 'notebook', note: 'kept' });
  });

  it('leaves traces without the attributes alone', () => {
    const { record } = normalizeTrace([
      span('plain', { start: 0, end: 1, attrs: { 'input.value': 'hi' } }),
    ]);
    expect(record.reference).toBeUndefined();
    expect(record.metadata?.conventions ?? []).not.toContain('touchstone-sdk');
  });
});
