import { describe, expect, it } from 'vitest';
import { parseSource } from './resource.js';
import { cronProblem, windowRunId, windowRunName, windowsAt } from './schedule.js';

const at = (iso: string) => Date.parse(iso);
const HOUR = 3_600_000;
const hourly = { cron: '0 * * * *', window: HOUR, startingDeadline: HOUR };

describe('the schedule calendar', () => {
  it('takes five UTC fields and names what is wrong otherwise', () => {
    expect(cronProblem('0 * * * *')).toBeUndefined();
    expect(cronProblem('0 0 * * * *')).toMatch(/five fields.*found 6/);
    expect(cronProblem('@hourly')).toMatch(/found 1/);
    expect(cronProblem('61 * * * *')).toBe('not a valid cron expression');
    expect(cronProblem('0 0 30 2 *')).toBe('never fires');
  });

  it('ends windows on the cron boundary, start included and end excluded', () => {
    const w = windowsAt(hourly, at('2026-03-29T00:30:00Z'), at('2026-03-29T01:00:00Z'));
    expect(w).toEqual({
      missed: 0,
      cursor: at('2026-03-29T00:30:00Z'),
      due: { startMs: at('2026-03-29T00:00:00Z'), endMs: at('2026-03-29T01:00:00Z') },
    });
    // One millisecond before the boundary nothing is due yet.
    expect(windowsAt(hourly, at('2026-03-29T00:30:00Z'), at('2026-03-29T00:59:59.999Z'))).toEqual({
      missed: 0,
      cursor: at('2026-03-29T00:30:00Z'),
      nextAt: at('2026-03-29T01:00:00Z'),
    });
  });

  it('is UTC: the night European clocks move forward still has 24 hourly windows', () => {
    let cursor = at('2026-03-29T00:00:00Z');
    const ends: number[] = [];
    for (let i = 0; i < 24; i++) {
      const w = windowsAt(hourly, cursor, cursor + HOUR);
      if (w.due === undefined) throw new Error('a window is due every hour');
      ends.push(w.due.endMs);
      cursor = w.due.endMs;
    }
    expect(ends.map((e, i) => e - (ends[i - 1] ?? e - HOUR))).toEqual(Array(24).fill(HOUR));
  });

  it('counts windows whose deadline passed and keeps the one still due', () => {
    // Paused from 00:30 to 03:10: the 01:00 and 02:00 windows missed their 1h deadline.
    const w = windowsAt(hourly, at('2026-01-01T00:30:00Z'), at('2026-01-01T03:10:00Z'));
    expect(w.missed).toBe(2);
    expect(w.cursor).toBe(at('2026-01-01T02:00:00Z'));
    expect(w.due?.endMs).toBe(at('2026-01-01T03:00:00Z'));
  });

  it('gives a window the same run id every time, and a new one for a new source', () => {
    const window = { startMs: 0, endMs: HOUR };
    const a = windowRunId('p', 's', '2026-01-01T00:00:00Z', window);
    expect(a).toMatch(/^run_[0-9a-f]{24}$/);
    expect(windowRunId('p', 's', '2026-01-01T00:00:00Z', window)).toBe(a);
    expect(windowRunId('p', 's', '2026-01-02T00:00:00Z', window)).not.toBe(a);
    expect(windowRunName('x'.repeat(80), window)).toHaveLength(63);
    expect(windowRunName('hourly', window)).toBe('hourly-197001010100');
  });
});

const scheduled = (spec: Record<string, unknown>) => ({
  apiVersion: 'touchstone.dev/v1alpha1',
  kind: 'TraceSource',
  metadata: { name: 'hourly' },
  spec: {
    connector: 'mlflow',
    endpoint: 'https://mlflow.example.com',
    locations: ['agent'],
    schedule: { cron: '0 * * * *', window: '1h' },
    runSpec: { evaluators: [{ ref: 'tool-errors' }] },
    ...spec,
  },
});

function refusal(spec: Record<string, unknown>): string[] {
  try {
    parseSource(scheduled(spec));
  } catch (err) {
    return (err as { details: { path: string }[] }).details.map((d) => d.path);
  }
  throw new Error('accepted');
}

describe('scheduled-mode fields at apply', () => {
  it('accepts a schedule with its defaults', () => {
    expect(parseSource(scheduled({})).spec.schedule).toEqual({
      cron: '0 * * * *',
      window: HOUR,
      startingDeadline: HOUR,
      maxRecords: 10_000,
    });
  });

  it('refuses each bad field, naming it', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ schedule: { cron: '0 0 * * * *', window: '1h' } }, 'spec.schedule.cron'],
      [{ schedule: { cron: '0 * * * *', window: '0' } }, 'spec.schedule.window'],
      [{ schedule: { cron: '0 * * * *', window: 0 } }, 'spec.schedule.window'],
      [{ schedule: { cron: '0 * * * *', window: '169h' } }, 'spec.schedule.window'],
      [
        { schedule: { cron: '0 * * * *', window: '1h', startingDeadline: '30s' } },
        'spec.schedule.startingDeadline',
      ],
      [
        { schedule: { cron: '0 * * * *', window: '1h', startingDeadline: '25h' } },
        'spec.schedule.startingDeadline',
      ],
      [
        { schedule: { cron: '0 * * * *', window: '1h', maxRecords: 10_001 } },
        'spec.schedule.maxRecords',
      ],
      [
        { schedule: { cron: '0 * * * *', window: '1h', maxRecords: 0 } },
        'spec.schedule.maxRecords',
      ],
      [{ schedule: { cron: '0 * * * *', window: '1h', every: '1h' } }, 'spec.schedule.every'],
      [{ runSpec: { evaluators: [] } }, 'spec.runSpec.evaluators'],
      [{ runSpec: {} }, 'spec.runSpec.evaluators'],
      [
        { runSpec: { evaluators: [{ ref: 'x' }], target: { http: { url: 'https://a.example' } } } },
        'spec.runSpec.target',
      ],
      [
        { runSpec: { evaluators: [{ ref: 'x' }], dataset: { path: 'a.jsonl' } } },
        'spec.runSpec.dataset',
      ],
      [{ runSpec: { evaluators: [{ ref: 'x' }], harness: {} } }, 'spec.runSpec.harness'],
      [{ runSpec: { evaluators: [{ ref: 'x' }], environment: {} } }, 'spec.runSpec.environment'],
      [{ runSpec: { evaluators: [{ ref: 'x' }], trials: 3 } }, 'spec.runSpec.trials'],
      [{ runSpec: undefined }, 'spec.runSpec'],
      [{ schedule: undefined }, 'spec.schedule'],
      [{ policies: ['quality'] }, 'spec.policies'],
      [{ backfill: { since: '24h' } }, 'spec.backfill'],
      [{ writeBack: { enabled: true } }, 'spec.writeBack.enabled'],
    ];
    for (const [spec, path] of cases)
      expect({ spec, paths: refusal(spec) }).toEqual({ spec, paths: [path] });
  });
});
