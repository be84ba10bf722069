import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isPresent, ScoreSchema, type Step } from '../../core/index.js';
import { NEEDS } from '../contract.js';
import { evaluate } from './evaluate.testkit.js';
import { builtinEvaluators } from './index.js';

// Params for the evaluators that cannot run on defaults.
const REQUIRED: Record<string, object> = {
  'regex-match': { pattern: '\\d' },
  'json-schema': { schema: { type: 'object' } },
};

const trajectory: Step[] = [
  {
    type: 'llm',
    name: 'chat',
    error: '',
    usage: { inputTokens: 3, outputTokens: 2, costUsd: 0.01 },
  },
  { type: 'tool', name: 'search', input: '{"q":1}', error: '' },
  { type: 'tool', name: 'search', input: '{"q":1}', error: 'boom' },
];

const RECORDS = [
  { output: 'The answer is 42.', reference: '42' },
  { output: '{"a": 1}', reference: ['x', 'y'], usage: { latencyMs: 12 } },
  {
    output: [{ role: 'assistant', content: 'mail me at a@b.io' }],
    reference: { toolCalls: [{ name: 'search' }] },
    trajectory,
  },
  { output: { structured: true }, reference: 7, trajectory: [] },
  { output: 'x', reference: null, trajectory },
];

describe('builtinEvaluators', () => {
  it('has unique kebab-case types, all cheap, with known needs and a description', () => {
    const types = builtinEvaluators.map((f) => f.manifest.type);
    expect(new Set(types).size).toBe(types.length);
    for (const f of builtinEvaluators) {
      expect(f.manifest.type).toMatch(/^[a-z]+(-[a-z0-9]+)*$/);
      expect(f.manifest.cheap).toBe(true);
      expect(f.manifest.description.length).toBeGreaterThan(20);
      for (const need of f.manifest.needs) expect(NEEDS).toContain(need);
      expect(f.manifest.needs).not.toContain('judge');
      const names = f.manifest.scores.map((s) => s.name);
      expect(new Set(names).size).toBe(names.length);
    }
  });

  it('offers every evaluator the brief names', () => {
    expect(builtinEvaluators.map((f) => f.manifest.type).sort()).toEqual(
      [
        'exact-match',
        'contains',
        'regex-match',
        'fuzzy-match',
        'numeric-match',
        'json-valid',
        'json-schema',
        'length',
        'latency',
        'token-usage',
        'cost',
        'tool-errors',
        'loop-detection',
        'trajectory-match',
        'tool-call-accuracy',
        'step-budget',
        'pii-leak',
        'secret-leak',
      ].sort(),
    );
  });

  it('parses default params, or names the missing required field', () => {
    for (const f of builtinEvaluators) {
      const r = f.manifest.params.safeParse({});
      if (f.manifest.type in REQUIRED) {
        expect(r.success).toBe(false);
        expect(r.error?.issues[0]?.path.length).toBe(1);
      } else {
        expect(r.success, f.manifest.type).toBe(true);
      }
      expect(f.manifest.params.safeParse({ noSuchParam: 1 }).success).toBe(false);
    }
  });

  it('describes its params as JSON Schema (for the generated API docs)', () => {
    for (const f of builtinEvaluators) {
      for (const io of ['input', 'output'] as const) {
        const schema = z.toJSONSchema(f.manifest.params, { io });
        expect(schema.type, f.manifest.type).toBe('object');
      }
    }
    const latency = builtinEvaluators.find((f) => f.manifest.type === 'latency')!;
    expect(z.toJSONSchema(latency.manifest.params, { io: 'input' }).properties).toEqual({
      thresholdMs: { type: 'number', minimum: 0 },
    });
  });

  it('returns only declared, well-formed scores, or a skip with a reason', async () => {
    for (const f of builtinEvaluators) {
      const declared = new Map(f.manifest.scores.map((s) => [s.name, s]));
      for (const record of RECORDS) {
        // The runner skips records missing a declared need before evaluate is called.
        const present = f.manifest.needs.every((n) =>
          isPresent((record as Record<string, unknown>)[n]),
        );
        if (!present) continue;
        const out = await evaluate(f, REQUIRED[f.manifest.type] ?? {}, record);
        if ('skip' in out) {
          expect(out.skip.length, f.manifest.type).toBeGreaterThan(0);
          continue;
        }
        expect(out.scores.length).toBeGreaterThan(0);
        for (const score of out.scores) {
          const spec = declared.get(score.name);
          expect(spec, `${f.manifest.type} returned undeclared ${score.name}`).toBeDefined();
          expect(ScoreSchema.safeParse(score).success).toBe(true);
          if (spec?.kind === 'number') {
            expect(Number.isFinite(score.value)).toBe(true);
            if (spec.range) {
              expect(score.value).toBeGreaterThanOrEqual(spec.range[0]);
              expect(score.value).toBeLessThanOrEqual(spec.range[1]);
            }
          } else {
            expect(score.passed, `${f.manifest.type}.${score.name}`).toBeTypeOf('boolean');
          }
        }
      }
    }
  });
});
