import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  cliAsync,
  eventually,
  freePort,
  type ServerProcess,
  startServer,
} from '../support/process.js';
import {
  closeOpenTrace,
  type FixtureTraces,
  makeTraces,
  PHOENIX_PYTHON,
  PHOENIX_SKIP_REASON,
  type PhoenixAnnotation,
  type PhoenixServer,
  startPhoenixServer,
  traceAnnotations,
} from './phoenix/phoenix-server.js';

/**
 * A Phoenix trace source end to end: a real `phoenix serve` (SQLite, auth on, a system API key)
 * with traces made by real OpenInference instrumentation (test/interop/phoenix/make_traces.py),
 * the real `touchstone serve` process pulling them through a TraceSource applied with the CLI
 * (the API key from its environment, granted to the project and host), scoring them with a policy
 * of cheap evaluators and writing the scores back as Phoenix annotations, read back through
 * Phoenix's REST API. Needs TOUCHSTONE_INTEROP_PHOENIX_PYTHON (test/interop/phoenix/README.md);
 * skipped without it.
 */

if (PHOENIX_PYTHON === undefined) {
  describe('trace source against a live Phoenix server', () => {
    it.skip(`skipped: ${PHOENIX_SKIP_REASON}`, () => {});
  });
}

const PROJECT = 'touchstone-source';
const SOURCE = 'phoenix-live';
const POLICY = 'agent-health';
const POLL_SECONDS = 2;
const KEY_VAR = 'PHOENIX_INTEROP_API_KEY';

interface Score {
  name: string;
  value?: number;
  passed?: boolean;
  label?: string;
  explanation?: string;
}

interface TraceScores {
  results: Record<string, { evaluator: string; outcome: string; scores: Score[] }[]>;
}

interface TraceView {
  trace: { traceId: string; labels: Record<string, string>; error: boolean };
  record: { trajectory: { type: string; name: string; error?: string }[] };
}

interface SourceStatus {
  phase: string;
  deferred: number;
  pulled: number;
  scored: number;
  lastError?: string;
}

/** `/metrics` as name{labels} → value. */
async function metrics(base: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

const written = (m: Map<string, number>, outcome: string) =>
  m.get(
    `touchstone_source_scores_written_total{project="default",source="${SOURCE}",outcome="${outcome}"}`,
  ) ?? 0;
const skippedUnchanged = (m: Map<string, number>) =>
  m.get(
    `touchstone_source_traces_skipped_total{project="default",source="${SOURCE}",reason="unchanged"}`,
  ) ?? 0;

const log = (msg: string) => process.stdout.write(`[phoenix source] ${msg}\n`);

/** What a score becomes in Phoenix: the annotation's result. */
function resultOf(s: Score): PhoenixAnnotation['result'] {
  if (s.value !== undefined)
    return { score: s.value, label: null, explanation: s.explanation ?? null };
  if (s.passed !== undefined) {
    return {
      score: s.passed ? 1 : 0,
      label: s.passed ? 'pass' : 'fail',
      explanation: s.explanation ?? null,
    };
  }
  return { score: null, label: s.label ?? null, explanation: s.explanation ?? null };
}

describe.skipIf(PHOENIX_PYTHON === undefined)('trace source against a live Phoenix server', () => {
  let phoenix: PhoenixServer | undefined;
  let dir = '';
  let touchstone: ServerProcess | undefined;
  let base = '';
  let ids: FixtureTraces;
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

  async function call<T>(path: string): Promise<T> {
    const res = await fetch(`${base}${path}`);
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  function touchstoneCli(args: string[]): string {
    const r = cli([...args, '--server', base]);
    if (r.code !== 0) {
      throw new Error(`touchstone ${args.join(' ')}: exit ${r.code}\n${r.stdout}${r.stderr}`);
    }
    return r.stdout;
  }

  const sourceStatus = (): SourceStatus =>
    (JSON.parse(touchstoneCli(['source', 'get', SOURCE])) as { status: SourceStatus }).status;

  async function touchstoneScores(traceId: string): Promise<Score[]> {
    const entry = await call<TraceScores>(`/v1alpha1/traces/${traceId}/scores`);
    return (entry.results[POLICY] ?? [])
      .filter((r) => r.outcome === 'OUTCOME_SCORED')
      .flatMap((r) => r.scores);
  }

  /** Every scored metric is one CODE trace annotation with the policy's identifier. */
  async function expectWrittenBack(traceId: string): Promise<PhoenixAnnotation[]> {
    const scores = await touchstoneScores(traceId);
    expect(scores.length).toBeGreaterThan(0);
    const seen = await traceAnnotations(phoenix as PhoenixServer, PROJECT, traceId);
    const shape = (a: {
      name: string;
      annotator_kind: string;
      identifier: string;
      result: PhoenixAnnotation['result'];
    }) => a;
    expect(
      seen
        .map((a) =>
          shape({
            name: a.name,
            annotator_kind: a.annotator_kind,
            identifier: a.identifier,
            result: a.result,
          }),
        )
        .sort((a, b) => a.name.localeCompare(b.name)),
    ).toEqual(
      scores
        .map((s) =>
          shape({
            name: s.name,
            annotator_kind: 'CODE',
            identifier: `touchstone/${POLICY}/${s.name.split('.')[0]}`,
            result: resultOf(s),
          }),
        )
        .sort((a, b) => a.name.localeCompare(b.name)),
    );
    return seen;
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-phoenix-source-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        'log_level: warn',
        'online:',
        '  poll_interval: 100ms',
        '  visibility_timeout: 3s',
        'sources:',
        "  allow_hosts: ['127.0.0.1']",
        'credentials:',
        '  grants:',
        `    - env: ${KEY_VAR}`,
        '      projects: [default]',
        "      hosts: ['127.0.0.1']",
        '',
      ].join('\n'),
    );
    phoenix = await startPhoenixServer(PHOENIX_PYTHON as string);
    touchstone = await startServer(
      [
        '--data-dir',
        join(dir, 'data'),
        '--listen',
        `127.0.0.1:${port}`,
        '--config',
        join(dir, 'config.yaml'),
      ],
      { [KEY_VAR]: phoenix.apiKey },
    );
    log(`Phoenix ${phoenix.version} and touchstone up (${elapsed()})`);
    ids = await makeTraces(phoenix, PROJECT);
    log(`traces made (${elapsed()})`);

    writeFileSync(
      join(dir, 'policy.yaml'),
      [
        'apiVersion: touchstone.dev/v1alpha1',
        'kind: OnlineEvalPolicy',
        'metadata:',
        `  name: ${POLICY}`,
        'spec:',
        '  stages:',
        '    - evaluators:',
        '        - ref: tool-errors',
        '        - ref: step-budget',
        '          params: {maxSteps: 10, maxToolCalls: 5}',
        '',
      ].join('\n'),
    );
    touchstoneCli(['policy', 'apply', '-f', join(dir, 'policy.yaml')]);
    writeFileSync(
      join(dir, 'source.yaml'),
      [
        'apiVersion: touchstone.dev/v1alpha1',
        'kind: TraceSource',
        'metadata:',
        `  name: ${SOURCE}`,
        'spec:',
        '  connector: phoenix',
        `  endpoint: ${phoenix.base}`,
        `  locations: [${PROJECT}]`,
        `  credentials: {env: ${KEY_VAR}}`,
        '  backfill: {since: 1h}',
        `  poll: {interval: ${POLL_SECONDS}s}`,
        '  maxTraceDuration: 5m',
        '  maxInProgressAge: 1h',
        `  policies: [${POLICY}]`,
        '  writeBack: {enabled: true}',
        '',
      ].join('\n'),
    );
    expect(touchstoneCli(['source', 'apply', '-f', join(dir, 'source.yaml')])).toContain(
      `created: source ${SOURCE} (project default)`,
    );
    log(`policy and source applied (${elapsed()})`);
  }, 400_000);

  afterAll(async () => {
    const warnings = (touchstone?.output() ?? '')
      .split('\n')
      .filter((l) => /"level":(4|5)\d/.test(l))
      .map(
        (l) =>
          `${/"msg":"([^"]*)"/.exec(l)?.[1] ?? l.slice(0, 200)} ${/"code":"(\w+)"/.exec(l)?.[1] ?? ''}`,
      );
    if (warnings.length > 0) log(`touchstone warnings: ${warnings.join(' | ')}`);
    const proc = touchstone?.proc;
    if (proc !== undefined && proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      await touchstone?.exited;
      clearTimeout(timer);
    }
    await phoenix?.stop();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
    log(`done (${elapsed()})`);
  }, 60_000);

  it('writes the scores of the finished traces back as Phoenix trace annotations', async () => {
    // agent and langgraph: tool-errors + step-budget's three; each question (no tool call, so
    // tool-errors skips): step-budget's three.
    await eventually(async () => {
      const m = await metrics(base);
      return written(m, 'created') >= 20 ? true : undefined;
    }, 120_000);
    log(`first write-back done (${elapsed()})`);
    const agentScores = await touchstoneScores(ids.agent);
    expect(agentScores[0]).toEqual({
      name: 'tool-errors',
      value: 0.5,
      explanation: '1 of 2 tool calls failed: suggest_clothes',
    });
    const seen = await expectWrittenBack(ids.agent);
    expect(seen.find((a) => a.name === 'tool-errors')).toMatchObject({
      source: 'API',
      metadata: { source: 'touchstone', policy: POLICY, evaluator: 'tool-errors' },
    });
    await expectWrittenBack(ids.langgraph);
    for (const q of ids.questions) await expectWrittenBack(q);
  }, 150_000);

  it('shows the pulled traces with label source=<name>, the root span’s labels, and the trajectory', async () => {
    const agent = await call<TraceView>(`/v1alpha1/traces/${ids.agent}`);
    expect(agent.trace.labels).toMatchObject({ source: SOURCE });
    expect(agent.trace.error).toBe(true);
    expect(agent.record.trajectory.map((s) => `${s.type}:${s.name}`)).toEqual([
      'agent:weather-agent',
      'llm:ChatCompletion',
      'tool:get_weather',
      'llm:ChatCompletion',
      'tool:suggest_clothes',
      'llm:ChatCompletion',
    ]);
    const q = await call<TraceView>(`/v1alpha1/traces/${ids.questions[0]}`);
    expect(q.trace.labels).toEqual({ source: SOURCE, env: 'interop', team: 'search' });
  });

  it('defers the trace whose root span has not arrived', async () => {
    const status = sourceStatus();
    expect(status).toMatchObject({ phase: 'tailing', deferred: 1 });
    expect(status.lastError).toBeUndefined();
    expect(await touchstoneScores(ids.open.trace_id).catch(() => [])).toEqual([]);
  });

  it('re-polling writes nothing new and leaves the annotations untouched', async () => {
    const before = await metrics(base);
    const annotationsBefore = await traceAnnotations(phoenix as PhoenixServer, PROJECT, ids.agent);
    await eventually(
      async () => {
        const m = await metrics(base);
        return skippedUnchanged(m) >= skippedUnchanged(before) + 12 ? true : undefined;
      },
      10 * POLL_SECONDS * 1000,
    );
    const after = await metrics(base);
    for (const outcome of ['created', 'updated', 'unchanged', 'failed']) {
      expect({ outcome, n: written(after, outcome) }).toEqual({
        outcome,
        n: written(before, outcome),
      });
    }
    expect(await traceAnnotations(phoenix as PhoenixServer, PROJECT, ids.agent)).toEqual(
      annotationsBefore,
    );
  }, 60_000);

  it('a late-arriving root span completes the deferred trace: scored and written back', async () => {
    const before = await metrics(base);
    await closeOpenTrace(phoenix as PhoenixServer, PROJECT, ids.open);
    await eventually(async () => {
      const m = await metrics(base);
      return written(m, 'created') >= written(before, 'created') + 3 ? true : undefined;
    }, 60_000);
    log(`late trace scored (${elapsed()})`);
    const view = await call<TraceView>(`/v1alpha1/traces/${ids.open.trace_id}`);
    expect(view.trace.labels).toMatchObject({ source: SOURCE });
    expect(view.record.trajectory.map((s) => `${s.type}:${s.name}`)).toEqual([
      'agent:open-agent',
      'llm:ChatCompletion',
    ]);
    await expectWrittenBack(ids.open.trace_id);
    expect(sourceStatus().deferred).toBe(0);
  }, 90_000);

  it('`touchstone source list` shows the source tailing with its counts', () => {
    const status = sourceStatus();
    expect(status.pulled).toBeGreaterThanOrEqual(7);
    expect(status.scored).toBe(23);
    const row =
      touchstoneCli(['source', 'list'])
        .split('\n')
        .find((l) => l.startsWith(`default/${SOURCE}`)) ?? '';
    expect(row.trim().split(/\s+/)).toEqual([
      `default/${SOURCE}`,
      'phoenix',
      'tailing',
      expect.stringMatching(/^\d+s$/),
      String(status.pulled),
      '23',
    ]);
  }, 30_000);

  it('writes a person’s annotation of a pulled trace back as a HUMAN annotation, upserted on change', async () => {
    const traceId = ids.questions[0] as string;
    // Not blocking the event loop (as the synchronous CLI would): an idle keep-alive socket to
    // Phoenix is then dropped in time instead of being reused after Phoenix closed it.
    const annotate = async (...flags: string[]) => {
      const r = await cliAsync([
        'traces',
        'annotate',
        traceId,
        '--name',
        'on-topic',
        ...flags,
        '--server',
        base,
      ]);
      expect(r.code, r.stderr).toBe(0);
    };
    const human = async () =>
      (await traceAnnotations(phoenix as PhoenixServer, PROJECT, traceId)).filter(
        (a) => a.annotator_kind === 'HUMAN',
      );
    await annotate('--label', 'mostly', '--comment', 'drifts at the end');
    const [created] = await eventually(async () => {
      const found = await human();
      return found.length > 0 ? found : undefined;
    }, 60_000);
    expect(created).toMatchObject({
      name: 'on-topic',
      annotator_kind: 'HUMAN',
      // No auth on loopback: the caller is anonymous.
      identifier: 'touchstone/@human/anonymous/on-topic',
      result: { label: 'mostly', score: null, explanation: 'drifts at the end' },
      metadata: { source: 'touchstone', annotator: 'anonymous' },
    });
    await annotate('--value', '0.75');
    const [updated] = await eventually(async () => {
      const found = await human();
      return found[0]?.result.score === 0.75 ? found : undefined;
    }, 60_000);
    expect(updated?.id).toBe(created?.id);
    expect(await human()).toHaveLength(1);
    log(`annotation written back (${elapsed()})`);
  }, 150_000);
});
