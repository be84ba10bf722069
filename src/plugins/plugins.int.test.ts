import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES_DIR } from '../../examples/plugins/build.js';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { cli } from '../../test/support/process.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';
import { answering, command, writeChain } from './wat.testkit.js';

/**
 * Plug-in evaluators in a whole app: listed with their sha256, usable in direct evaluate, in an
 * online policy (also as a later cascade stage) and in an offline run, with the outcome semantics
 * of built-ins (an error is excluded from means and gates, a skip is not a zero); a chain that
 * does not verify refuses startup.
 */

const root = mkdtempSync(join(tmpdir(), 'touchstone-plugins-app-'));
const chain = writeChain(join(root, 'chain'), [
  {
    name: 'acme',
    module: answering('{"scores":[{"name":"ok","passed":true,"explanation":"looks fine"}]}'),
    evaluators: [{ name: 'acme.ok', needs: ['output'], scores: [{ name: 'ok', kind: 'passed' }] }],
  },
  {
    name: 'broken',
    module: command('(unreachable)'),
    evaluators: [{ name: 'acme.broken', scores: [{ name: 'broken', kind: 'number' }] }],
  },
  {
    name: 'spin',
    module: command('(loop $l (br $l))'),
    evaluators: [{ name: 'acme.spin', scores: [{ name: 'spin', kind: 'number' }] }],
    limits: { timeoutMs: 500 },
  },
]);

async function build(plugins: Record<string, unknown>, clock = new FakeClock(Date.now())) {
  const config = loadConfig({
    overrides: {
      data_dir: join(root, `data-${Math.random().toString(36).slice(2)}`),
      log_level: 'silent',
      traces: { completion_grace: '2s' },
      plugins,
    },
  });
  return createApp(config, {
    env: {},
    clock,
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
}

describe('plug-in evaluators in the app', () => {
  const clock = new FakeClock(Date.parse('2026-11-22T10:00:00Z'));
  let app: App;
  let examples: App;

  beforeAll(async () => {
    app = await build({ index: chain.index, index_sha256: chain.sha256, workers: 2 }, clock);
    examples = await build({
      index: join(EXAMPLES_DIR, 'index.yaml'),
      index_sha256_file: join(EXAMPLES_DIR, 'index.sha256'),
      workers: 1,
    });
  });
  afterAll(async () => {
    await app.close();
    await examples.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('lists plug-in evaluators with their hashes beside the built-ins', async () => {
    const res = await examples.server.inject({ url: '/v1alpha1/evaluators' });
    expect(res.statusCode).toBe(200);
    const list = res.json().evaluators as { type: string; plugin?: { sha256: string } }[];
    expect(list.map((e) => e.type)).toEqual(
      expect.arrayContaining(['exact-match', 'example.go.exact_match', 'example.rust.exact_match']),
    );
    const go = list.find((e) => e.type === 'example.go.exact_match');
    expect(go).toMatchObject({
      needs: ['output', 'reference'],
      params: { type: 'object', additionalProperties: false },
      plugin: {
        name: 'example-go',
        version: '1.0.0',
        sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
    });
    expect(list.find((e) => e.type === 'exact-match')).not.toHaveProperty('plugin');
  });

  it('evaluates directly with the same outcomes as built-ins', async () => {
    const res = await examples.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      payload: {
        records: [
          { id: 'a', output: 'Paris', reference: 'Paris' },
          { id: 'b', output: 'Paris' },
        ],
        evaluators: [{ ref: 'example.c.exact_match' }, { ref: 'exact-match' }],
      },
    });
    expect(res.statusCode).toBe(200);
    const [a, b] = res.json().results;
    expect(a.results).toMatchObject([
      { evaluator: 'example.c.exact_match', outcome: 'OUTCOME_SCORED', scores: [{ passed: true }] },
      { evaluator: 'exact-match', outcome: 'OUTCOME_SCORED' },
    ]);
    expect(b.results.map((r: { outcome: string }) => r.outcome)).toEqual([
      'OUTCOME_SKIPPED',
      'OUTCOME_SKIPPED',
    ]);
    const bad = await examples.server.inject({
      method: 'POST',
      url: '/v1alpha1/evaluate',
      payload: {
        records: [{ output: 'x' }],
        evaluators: [{ ref: 'example.c.exact_match', params: { x: 1 } }],
      },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('EVALUATOR_PARAMS_INVALID');
  });

  it('scores in an online policy, as a first and as a later cascade stage', async () => {
    await app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'plugged' },
      spec: {
        stages: [
          { evaluators: [{ ref: 'acme.ok' }, { ref: 'acme.broken' }] },
          { when: 'scores["acme.ok"] == 1.0', evaluators: [{ ref: 'acme.ok', name: 'again' }] },
        ],
      },
    });
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'weather' }, (tr) => {
      traceId = agentTrace(tr, { extra: { 'input.value': 'Weather?', 'output.value': 'Sunny.' } });
    });
    const posted = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json' },
    });
    expect(posted.statusCode).toBe(200);
    clock.advance(2500);
    await app.completer.tick();
    await app.engine.tick();
    const scores = (await app.server.inject({ url: `/v1alpha1/traces/${traceId}/scores` })).json();
    expect(scores.results.plugged).toEqual([
      expect.objectContaining({
        evaluator: 'acme.ok',
        outcome: 'OUTCOME_SCORED',
        scores: [expect.objectContaining({ name: 'acme.ok', passed: true })],
      }),
      expect.objectContaining({
        evaluator: 'acme.broken',
        outcome: 'OUTCOME_ERROR',
        reason: expect.stringContaining('trapped'),
        scores: [],
      }),
      expect.objectContaining({ evaluator: 'again', outcome: 'OUTCOME_SCORED' }),
    ]);
  });

  it('runs in an offline run: errors are left out of means and gates, a deadline is an error', async () => {
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1alpha1/runs',
      payload: {
        name: 'plugged',
        dataset: {
          records: [
            { id: 'q1', output: 'Paris', reference: 'Paris' },
            { id: 'q2', output: 'Rome', reference: 'Rome' },
          ],
        },
        evaluators: [{ ref: 'acme.ok' }, { ref: 'acme.broken' }, { ref: 'acme.spin' }],
        gates: ['acme.ok >= 1.0'],
      },
    });
    expect(res.statusCode).toBe(200);
    await app.runExecutor.drain();
    const run = (await app.server.inject({ url: `/v1alpha1/runs/${res.json().id}` })).json();
    expect(run.status).toBe('RUN_STATUS_SUCCEEDED');
    const summary = (metric: string) =>
      run.summaries.find((s: { metric: string }) => s.metric === metric);
    expect(summary('acme.ok')).toMatchObject({ n: 2, mean: 1 });
    expect(summary('acme.broken')).toMatchObject({ n: 0, mean: null, counts: { error: 2 } });
    expect(summary('acme.spin')).toMatchObject({ n: 0, mean: null, counts: { error: 2 } });
    expect(run.gates).toEqual([expect.objectContaining({ passed: true, value: 1 })]);
  });

  it('refuses to start when a pin does not match, naming the file and both hashes', async () => {
    const wrong = '0'.repeat(64);
    await expect(build({ index: chain.index, index_sha256: wrong })).rejects.toThrow(
      `the plug-in index ${chain.index} has sha256 ${chain.sha256}, but plugins.index_sha256 pins ${wrong}`,
    );
  });
});

describe('plug-in evaluators in the CLI without a server', () => {
  it('lists and evaluates with the plug-ins of the config file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-plugins-cli-'));
    try {
      const config = join(dir, 'config.yaml');
      writeFileSync(
        config,
        `plugins:\n  index: ${JSON.stringify(join(EXAMPLES_DIR, 'index.yaml'))}\n  index_sha256_file: ${JSON.stringify(join(EXAMPLES_DIR, 'index.sha256'))}\n`,
      );
      const records = join(dir, 'records.jsonl');
      writeFileSync(records, '{"output": "Paris", "reference": "Paris"}\n');
      const listed = cli(['evaluators', 'list', '--json', '--config', config]);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toContain('example.rust.exact_match');
      const r = cli([
        'evaluate',
        '-f',
        records,
        '-e',
        'example.rust.exact_match',
        '--json',
        '--config',
        config,
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).results[0].results[0]).toMatchObject({
        evaluator: 'example.rust.exact_match',
        outcome: 'OUTCOME_SCORED',
        scores: [{ passed: true }],
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
