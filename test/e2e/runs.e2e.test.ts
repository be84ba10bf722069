import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { OpenAiStub } from '../support/openai-stub.js';
import {
  type CliResult,
  callJson,
  cliAsync,
  freePort,
  type ServerProcess,
  startServer,
} from '../support/process.js';

/**
 * Offline runs through the real `touchstone` processes: a run against an OpenAI-compatible stub
 * target executed by a server and driven by `touchstone run --server` (3 trials; pass@k and pass^k
 * checked against values worked out by hand), a `command` target run embedded by the CLI, and the
 * CLI's exit codes: 0 when the gates hold, 3 when one fails, 2 for a bad spec.
 */

/** The CLI as a child process, without blocking this process (the stub target answers from it). */
function touchstone(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return cliAsync(args, { TOUCHSTONE_SERVER: '', ...env });
}

/** Number of k-subsets of `n` items. */
function choose(n: number, k: number): number {
  let out = 1;
  for (let i = 0; i < k; i++) out = (out * (n - i)) / (i + 1);
  return out;
}

/**
 * pass@k and pass^k by enumeration, independent of the server's closed form: for each task, the
 * share of the k-subsets of its trials with at least one pass (pass@k) or only passes (pass^k),
 * then the mean over tasks.
 */
function byEnumeration(tasks: boolean[][], k: number): { at: number; hat: number } {
  let at = 0;
  let hat = 0;
  for (const trials of tasks) {
    let any = 0;
    let all = 0;
    const n = trials.length;
    for (let mask = 0; mask < 1 << n; mask++) {
      const picked = trials.filter((_, i) => (mask >> i) & 1);
      if (picked.length !== k) continue;
      if (picked.some(Boolean)) any++;
      if (picked.every(Boolean)) all++;
    }
    at += any / choose(n, k);
    hat += all / choose(n, k);
  }
  return { at: at / tasks.length, hat: hat / tasks.length };
}

describe('touchstone run (real processes)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-runs-e2e-'));
  const stub = new OpenAiStub();
  let stubUrl = '';
  let server: ServerProcess;
  let base = '';

  /**
   * Whether each of the 3 trials of each task answers correctly. The stub counts how often it was
   * asked the same conversation, so trial outcomes do not depend on the order calls arrive in.
   */
  const OUTCOMES: Record<string, boolean[]> = {
    q0: [true, true, true],
    q1: [true, false, true],
    q2: [false, false, false],
    q3: [true, true, false],
    q4: [false, true, false],
  };

  beforeAll(async () => {
    stub.answer = (question, seen) => {
      const right = OUTCOMES[question]?.[seen];
      return right === undefined ? 'unexpected' : right ? `A-${question}` : 'wrong';
    };
    stubUrl = await stub.start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    writeFileSync(
      join(dir, 'server.yaml'),
      YAML.stringify({ log_level: 'warn', runs: { allow_hosts: ['127.0.0.1'] } }),
    );
    server = await startServer([
      '--data-dir',
      join(dir, 'server-data'),
      '--listen',
      `127.0.0.1:${port}`,
      '--config',
      join(dir, 'server.yaml'),
    ]);
  });
  afterAll(async () => {
    server?.proc.kill('SIGKILL');
    await stub.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs an OpenAI-compatible target on the server with 3 trials; pass@k and pass^k match the hand count', async () => {
    const spec = {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'Run',
      metadata: { name: 'stub-trials', labels: { 'touchstone.dev/project': 'agents' } },
      spec: {
        dataset: {
          records: Object.keys(OUTCOMES).map((q) => ({ id: q, input: q, reference: `A-${q}` })),
        },
        target: {
          kind: 'openai-compatible',
          baseUrl: stubUrl,
          model: 'stub-model',
          systemPrompt: 'Answer with the code only.',
          params: { temperature: 0 },
        },
        evaluators: [{ ref: 'exact-match' }],
        trials: 3,
        gates: ['exact-match.pass^3 >= 0.2', 'exact-match.pass@3 >= 0.8', 'exact-match >= 0.5'],
      },
    };
    const file = join(dir, 'stub-run.yaml');
    writeFileSync(file, YAML.stringify(spec));
    const ran = await touchstone(['run', '-f', file, '--server', base]);
    expect(ran.stderr).toContain('progress:');
    expect(ran.code, ran.stdout + ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/SUCCEEDED/);
    expect(ran.stdout).toMatch(/exact-match\s+15\s+0\.533/);
    expect(ran.stdout).toContain('✓ exact-match.pass^3 >= 0.2 (value 0.2)');
    expect(ran.stdout).toContain('✓ exact-match.pass@3 >= 0.8 (value 0.8)');

    // Worked out by hand from OUTCOMES: passes per task c = 3, 2, 0, 2, 1 of n = 3.
    // pass@k = mean(1 − C(n−c,k)/C(n,k)), pass^k = mean(C(c,k)/C(n,k)):
    //   k=1: 8/15 both; k=2: pass@2 = (1+1+0+1+2/3)/5 = 11/15, pass^2 = (1+1/3+0+1/3+0)/5 = 1/3;
    //   k=3: pass@3 = 4/5 (tasks with any pass), pass^3 = 1/5 (q0 only).
    const hand = {
      passAtK: { 1: 8 / 15, 2: 11 / 15, 3: 4 / 5 },
      passHatK: { 1: 8 / 15, 2: 1 / 3, 3: 1 / 5 },
    };
    const tasks = Object.values(OUTCOMES);
    for (const k of [1, 2, 3] as const) {
      const e = byEnumeration(tasks, k);
      expect(e.at).toBeCloseTo(hand.passAtK[k], 12);
      expect(e.hat).toBeCloseTo(hand.passHatK[k], 12);
    }

    const list = await callJson(base, 'GET', '/v1alpha1/runs?project=agents');
    const id = list.runs[0].id as string;
    const run = await callJson(base, 'GET', `/v1alpha1/runs/${id}`);
    expect(run.status).toBe('RUN_STATUS_SUCCEEDED');
    expect(run.progress).toEqual({ total: 15, done: 15 });
    const summary = run.summaries.find((s: { metric: string }) => s.metric === 'exact-match');
    expect(summary.n).toBe(15);
    expect(summary.mean).toBeCloseTo(8 / 15, 12);
    for (const k of [1, 2, 3] as const) {
      expect(summary.passAtK[k]).toBeCloseTo(hand.passAtK[k], 12);
      expect(summary.passHatK[k]).toBeCloseTo(hand.passHatK[k], 12);
    }
    expect(run.gates.map((g: { passed: boolean }) => g.passed)).toEqual([true, true, true]);

    // Every call went through the target as specified: 5 tasks × 3 trials, system prompt first.
    expect(stub.requests).toHaveLength(15);
    for (const r of stub.requests) {
      expect(r.body.model).toBe('stub-model');
      expect(r.body.temperature).toBe(0);
      expect(r.body.messages?.[0]).toEqual({
        role: 'system',
        content: 'Answer with the code only.',
      });
    }
    const results = await callJson(base, 'GET', `/v1alpha1/runs/${id}/results?page_size=100`);
    expect(results.results).toHaveLength(15);
    const q1 = results.results.filter((r: { recordId: string }) => r.recordId === 'q1');
    expect(q1.map((r: { trial: number }) => r.trial).sort()).toEqual([0, 1, 2]);
    expect(
      q1
        .map(
          (r: { results: { scores: { passed: boolean }[] }[] }) => r.results[0]?.scores[0]?.passed,
        )
        .filter(Boolean),
    ).toHaveLength(2);

    // A retried `run --server` with the same Idempotency-Key gets the same run, not a second one.
    const keyed = ['run', '-f', file, '--server', base, '--no-wait', '--json'];
    const first = await touchstone([...keyed, '--idempotency-key', 'ci-job-42']);
    const again = await touchstone([...keyed, '--idempotency-key', 'ci-job-42']);
    expect(first.code, first.stderr).toBe(0);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).id).toBe(JSON.parse(first.stdout).id);
    const other = await touchstone([...keyed, '--idempotency-key', 'ci-job-43']);
    expect(JSON.parse(other.stdout).id).not.toBe(JSON.parse(first.stdout).id);
  }, 180_000);

  const agent = () => {
    const file = join(dir, 'agent.mjs');
    writeFileSync(
      file,
      [
        "let s = '';",
        "process.stdin.on('data', (d) => (s += d)).on('end', () => {",
        "  const answers = { '2+2': '4', 'capital of France': 'Paris', '3*3': '9' };",
        "  process.stdout.write((answers[s] ?? 'no idea') + '\\n');",
        '});',
      ].join('\n'),
    );
  };

  function commandSpec(gate: string): string {
    return YAML.stringify({
      name: 'command-agent',
      project: 'agents',
      dataset: {
        records: [
          { id: 'a', input: '2+2', reference: '4' },
          { id: 'b', input: 'capital of France', reference: 'Paris' },
          { id: 'c', input: '3*3', reference: '9' },
          { id: 'd', input: 'meaning of life', reference: '42' },
        ],
      },
      target: { kind: 'command', argv: ['node', 'agent.mjs'], timeout: '20s' },
      evaluators: [{ ref: 'exact-match' }],
      gates: [gate],
    });
  }

  it('runs a command target embedded: exit 0 when the gates hold, 3 when one fails', async () => {
    agent();
    const data = join(dir, 'cli-data');
    writeFileSync(join(dir, 'pass.yaml'), commandSpec('exact-match >= 0.75'));
    const passed = await touchstone(['run', '-f', join(dir, 'pass.yaml'), '--data-dir', data]);
    expect(passed.code, passed.stdout + passed.stderr).toBe(0);
    expect(passed.stdout).toMatch(/SUCCEEDED/);
    expect(passed.stdout).toContain('✓ exact-match >= 0.75 (value 0.75)');

    writeFileSync(join(dir, 'fail.yaml'), commandSpec('exact-match >= 0.9'));
    const failed = await touchstone([
      'run',
      '-f',
      join(dir, 'fail.yaml'),
      '--data-dir',
      data,
      '--json',
    ]);
    expect(failed.code, failed.stdout + failed.stderr).toBe(3);
    const run = JSON.parse(failed.stdout);
    expect(run.status).toBe('RUN_STATUS_FAILED');
    expect(run.gates).toEqual([
      { gate: { metric: 'exact-match', min: 0.9 }, passed: false, value: 0.75 },
    ]);

    // Both runs are in the local data dir for the other commands.
    const listed = await touchstone(['runs', 'list', '-p', 'agents', '--data-dir', data]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/command-agent\s+agents\s+FAILED\s+4\/4\s+1\/1 failed/);
    expect(listed.stdout).toMatch(/command-agent\s+agents\s+SUCCEEDED\s+4\/4\s+1 passed/);
    const got = await touchstone(['runs', 'get', run.id, '--data-dir', data]);
    expect(got.stdout).toContain('✗ exact-match >= 0.9 (value 0.75)');
    const deleted = await touchstone(['runs', 'delete', run.id, '--data-dir', data]);
    expect(deleted.code, deleted.stderr).toBe(0);
    const gone = await touchstone(['runs', 'get', run.id, '--data-dir', data]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain(`no run ${run.id}`);
  }, 180_000);

  it('a server refuses a command target; a bad spec exits 2 naming every bad field', async () => {
    writeFileSync(join(dir, 'cmd.yaml'), commandSpec('exact-match >= 0.5'));
    const refused = await touchstone(['run', '-f', join(dir, 'cmd.yaml'), '--server', base]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('target.kind: command targets are not allowed here');

    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      YAML.stringify({
        name: 'Bad Name',
        dataset: { records: [{ input: 'x' }] },
        target: { kind: 'http', url: 'ftp://nowhere', outputPath: 'answer' },
        evaluators: [{ ref: 'exact-mach' }],
        trials: 0,
        gates: ['exact-match >> 1'],
      }),
    );
    for (const where of [[], ['--server', base]]) {
      const out = await touchstone([
        'run',
        '-f',
        bad,
        '--data-dir',
        join(dir, 'cli-data'),
        ...where,
      ]);
      expect(out.code, out.stderr).toBe(2);
      for (const path of [
        'name',
        'target.url',
        'target.outputPath',
        'evaluators[0]',
        'trials',
        'gates[0]',
      ]) {
        expect(out.stderr).toMatch(new RegExp(`\\n  ${path.replace(/[[\].]/g, '\\$&')}[.:\\[]`));
      }
    }
    const notYaml = join(dir, 'broken.yaml');
    writeFileSync(notYaml, 'name: [unclosed\n');
    const broken = await touchstone(['run', '-f', notYaml, '--data-dir', join(dir, 'cli-data')]);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/line \d+, column \d+/);
  }, 180_000);
});
