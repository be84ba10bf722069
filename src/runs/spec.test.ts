import { describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import { defaultRegistry } from '../evaluators/index.js';
import { compileStoredSpec, parseRunSpec } from './spec.js';

const registry = defaultRegistry();

function refused(input: unknown, options = { registry }): TouchstoneError {
  try {
    parseRunSpec(input, options);
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('the spec was accepted');
}

const records = [
  { id: 'q1', input: 'capital of France?', output: 'Paris', reference: 'Paris' },
  { input: '2+2', output: '4', reference: '4' },
];

describe('run spec', () => {
  it('reads the plain form as YAML, filling defaults and ids', () => {
    const parsed = parseRunSpec(
      `
name: nightly
project: shop
labels: {touchstone.keep: "true"}
dataset:
  records:
    - {id: q1, input: capital of France?, output: Paris, reference: Paris}
    - {input: "2+2", output: "4", reference: "4"}
evaluators:
  - ref: exact-match
  - {ref: latency, name: speed, params: {thresholdMs: 2000}}
gates:
  - exact-match >= 0.5
  - {metric: speed.within, min: 0.9}
`,
      { registry },
    );
    expect(parsed).toMatchObject({
      name: 'nightly',
      project: 'shop',
      labels: { 'touchstone.keep': 'true' },
      declarative: false,
      spec: { trials: 1, harness: 'single-turn' },
    });
    expect(parsed.records?.map((r) => r.id)).toEqual(['q1', '1']);
    expect(parsed.gates.map((g) => typeof g !== 'string' && g.metric)).toEqual([
      'exact-match',
      'speed.within',
    ]);
    // What is stored is the body as written (no identity fields), records with their ids.
    expect(Object.keys(parsed.stored).sort()).toEqual(['dataset', 'evaluators', 'gates']);
    expect(compileStoredSpec(parsed.stored, registry).metrics.map((m) => m.metric)).toEqual([
      'exact-match',
      'speed',
      'speed.within',
    ]);
  });

  it('reads the declarative form with the project label', () => {
    const parsed = parseRunSpec(
      {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'Run',
        metadata: { name: 'ci', labels: { 'touchstone.dev/project': 'shop' } },
        spec: {
          dataset: { path: 'datasets/shop/qa/abc.jsonl' },
          evaluators: [{ ref: 'exact-match' }],
          trials: 3,
          gates: ['exact-match.pass^3 >= 0.8'],
        },
      },
      { registry },
    );
    expect(parsed).toMatchObject({ name: 'ci', project: 'shop', declarative: true });
    expect(parsed.stored).toEqual({
      dataset: { path: 'datasets/shop/qa/abc.jsonl' },
      evaluators: [{ ref: 'exact-match' }],
      trials: 3,
      gates: ['exact-match.pass^3 >= 0.8'],
    });
  });

  it('names every bad field at once', () => {
    const err = refused(
      {
        name: 'Bad Name',
        dataset: { records, path: 'datasets/p/x/y.jsonl' },
        evaluators: [{ ref: 'exact-mach' }, { ref: 'latency', params: { thresholdMs: 'fast' } }],
        trials: 0,
        gates: ['exact-match >= lots', 'exact-match.pass^2 >= 0.5'],
        targett: {},
        judge: 'nobody',
      },
      { registry, judgeExists: () => false } as never,
    );
    expect(err.code).toBe('RUN_SPEC_INVALID');
    const paths = err.details.map((d) => d.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'name',
        'dataset',
        'trials',
        'targett',
        'evaluators[0].ref',
        'evaluators[1].params.thresholdMs',
        'gates[0]',
        'judge',
      ]),
    );
  });

  it('checks gates against the metrics and trials beside the evaluators’ own problems', () => {
    const err = refused({
      name: 'n',
      dataset: { records },
      evaluators: [{ ref: 'exact-match' }, { ref: 'exact-match' }],
      trials: 2,
      gates: ['exact-match.pass^3 >= 0.5', 'fuzzy >= 0.5'],
    });
    expect(err.details).toEqual([
      { path: 'evaluators[1].name', message: expect.stringContaining('already the name') },
      { path: 'gates[0]', message: "k = 3 is more than the run's trials (2)" },
      { path: 'gates[1]', message: expect.stringContaining('no evaluator of the run produces') },
    ]);
    const gates = refused({
      name: 'n',
      dataset: { records },
      evaluators: [{ ref: 'exact-match' }],
      trials: 2,
      gates: ['exact-match.pass^3 >= 0.5', 'fuzzy >= 0.5'],
    });
    expect(gates.details.map((d) => d.path)).toEqual(['gates[0]', 'gates[1]']);
    expect(gates.details[1]?.message).toContain('known metrics: exact-match');
  });

  it('reports each problem once, also where the shape and a later check see the same field', () => {
    const err = refused(
      {
        name: 'n',
        dataset: { records },
        harness: 'conversation',
        evaluators: [{ ref: 'exact-match' }, { ref: 'nope' }, { ref: 'latency' }],
        labels: { team: 7 },
        trials: 2,
        gates: [{ metric: 'latency', min: 'x' }, 'nope.score >= 1', 'missing >= 1', 'garbage'],
        judge: '',
      },
      { registry, judgeExists: () => false } as never,
    );
    const paths = err.details.map((d) => d.path);
    expect(paths).toEqual([
      'labels.team',
      'harness',
      'judge',
      'gates[0]',
      'evaluators[1].ref',
      // gates[1] may be nope's (it did not bind); `missing` cannot be anyone's.
      'gates[2]',
      'gates[3]',
    ]);
    expect(new Set(paths).size).toBe(paths.length);

    // An evaluator whose shape is refused could produce any metric: no gate is called unknown.
    const shapeless = refused({
      name: 'n',
      dataset: { records },
      evaluators: [{ ref: 'exact-match', colour: 'red' }],
      gates: ['missing >= 1'],
    });
    expect(shapeless.details.map((d) => d.path)).toEqual(['evaluators[0].colour']);
  });

  it('refuses bad records by index without echoing their values, and duplicate ids', () => {
    const secret = 'sk-live-123456';
    const err = refused({
      name: 'n',
      dataset: {
        records: [
          { id: 'a', output: 'x' },
          { input: 'y', outptu: secret },
          7,
          { id: 'a', output: 'z' },
        ],
      },
      evaluators: [{ ref: 'exact-match' }],
    });
    expect(err.details.map((d) => d.path)).toEqual(
      expect.arrayContaining(['dataset.records[1].outptu', 'dataset.records[2]']),
    );
    expect(JSON.stringify(err.details) + err.message).not.toContain(secret);
    const dup = refused({
      name: 'n',
      dataset: {
        records: [
          { id: 'a', output: 'x' },
          { id: 'a', output: 'z' },
        ],
      },
      evaluators: [{ ref: 'exact-match' }],
    });
    expect(dup.details).toEqual([
      { path: 'dataset.records[1].id', message: 'the same id as records[0]' },
    ]);
  });

  it('refuses a harness without a target and reports YAML syntax errors with their line', () => {
    expect(
      refused({
        name: 'n',
        dataset: { records },
        evaluators: [{ ref: 'exact-match' }],
        harness: 'chat',
      }).details,
    ).toEqual([{ path: 'harness', message: 'a harness drives a target; set target too' }]);
    const yaml = refused('name: n\nevaluators: [\n  {ref: exact-match\n');
    expect(yaml.details[0]?.message).toMatch(/^not YAML or JSON: line \d+, column \d+/);
    expect(refused('').details[0]?.message).toBe('the spec is empty');
    expect(refused('- 1\n').details[0]?.message).toBe('a run spec is a mapping (object)');
  });
});

describe('docs/runs.md', () => {
  it('its example specs (plain and declarative) are valid', async () => {
    const { readFileSync } = await import('node:fs');
    const md = readFileSync('docs/runs.md', 'utf8');
    const examples = [...md.matchAll(/```yaml\n([\s\S]*?)```/g)]
      .map((m) => m[1] as string)
      .filter((text) => text.includes('evaluators:'));
    expect(examples.length).toBeGreaterThanOrEqual(2);
    for (const text of examples) {
      expect(parseRunSpec(text, { registry }).name).toBe('support-nightly');
    }
  });
});
