import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, eventually, freePort, type ServerProcess, startServer } from '../support/process.js';
import {
  MLFLOW_PYTHON,
  MLFLOW_SKIP_REASON,
  type MlflowServer,
  startMlflowServer,
} from './mlflow/mlflow-server.js';

/**
 * A trace source end to end: a real MLflow 3.x server (SQLite backend) with traces made by the
 * MLflow Python SDK, the real `touchstone serve` process pulling them through a TraceSource
 * applied with the CLI, scoring them with a policy of cheap evaluators and writing the scores
 * back; MLflow's own Python client reads what landed in the store. Needs
 * TOUCHSTONE_INTEROP_MLFLOW_PYTHON (test/interop/mlflow/README.md); skipped without it.
 *
 * The traces (test/interop/mlflow/source_traces.py): an agent trace (chain root, two chat-model
 * spans with messages and token usage, tool `get_weather` and tool `get_time`, which raises), a
 * trace with no tool call, and a trace still running (its root span open, one tool child done)
 * that the fixture process ends when told.
 */

if (MLFLOW_PYTHON === undefined) {
  describe('trace source against a live MLflow server', () => {
    it.skip(`skipped: ${MLFLOW_SKIP_REASON}`, () => {});
  });
}

const HERE = join(process.cwd(), 'test', 'interop', 'mlflow');
const EXPERIMENT = 'touchstone-source';
const SOURCE = 'mlflow-live';
const POLICY = 'agent-health';
const POLL_SECONDS = 2;

interface Ids {
  experiment_id: string;
  agent: string;
  plain: string;
  running: string;
}

/** An assessment as MLflow's Python client reads it. */
interface Assessment {
  id: string;
  name: string;
  value: unknown;
  source_type: string;
  source_id: string;
  rationale: string | null;
  valid: boolean;
  updated: number;
}

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

const READ_ASSESSMENTS = `
import json, sys, mlflow
mlflow.set_tracking_uri(sys.argv[1])
out = {}
for trace_id in sys.argv[2:]:
    out[trace_id] = [
        {"id": a.assessment_id, "name": a.name, "value": a.value,
         "source_type": a.source.source_type, "source_id": a.source.source_id,
         "rationale": a.rationale, "valid": a.valid, "updated": a.last_update_time_ms}
        for a in mlflow.get_trace(trace_id).info.assessments
    ]
print(json.dumps(out))
`;

/**
 * A late span and a tag on a finished trace. The span is a second failed `get_time` call, a
 * child of the root: MLflow stores it (OTLP log_spans), but the trace's info was finalized when
 * its root ended, so its listing (end time, state, tags, metadata) does not change and a source
 * does not read the trace again for it. The tag `touchstone.label.reviewed=yes` (as a reviewer
 * sets in the MLflow UI) changes the listing; the source re-reads the trace and finds both the
 * new label and the late span, which changes the metrics.
 */
const CHANGE_TRACE = `
import base64, os, sys
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
import mlflow
from mlflow.entities import Span
from mlflow.tracking import MlflowClient
uri, trace_id, experiment_id = sys.argv[1:4]
mlflow.set_tracking_uri(uri)
client = MlflowClient()
spans = client.get_trace(trace_id).data.spans
failed = next(s for s in spans if s.name == "get_time").to_dict()
last_end = max(s.end_time_ns for s in spans)
failed["span_id"] = base64.b64encode(os.urandom(8)).decode()
failed["start_time_unix_nano"] = last_end + 1_000_000
failed["end_time_unix_nano"] = last_end + 2_000_000
client._tracing_client.store.log_spans(experiment_id, [Span.from_dict(failed)])
client.set_trace_tag(trace_id, "touchstone.label.reviewed", "yes")
print("changed")
`;

import { runPython } from '../support/python.js';

function assessmentValue(score: Score): unknown {
  return score.value ?? score.passed ?? score.label;
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

/** A source counter of this test's source, by its extra label (`outcome="created"` …). */
function sourceCounter(m: Map<string, number>, name: string, extra: string): number {
  return m.get(`${name}{project="default",source="${SOURCE}",${extra}}`) ?? 0;
}

const written = (m: Map<string, number>, outcome: string) =>
  sourceCounter(m, 'touchstone_source_scores_written_total', `outcome="${outcome}"`);
const skippedUnchanged = (m: Map<string, number>) =>
  sourceCounter(m, 'touchstone_source_traces_skipped_total', 'reason="unchanged"');
const pulledTotal = (m: Map<string, number>) =>
  m.get(`touchstone_source_traces_pulled_total{project="default",source="${SOURCE}"}`) ?? 0;

const log = (msg: string) => process.stdout.write(`[mlflow source] ${msg}\n`);

describe.skipIf(MLFLOW_PYTHON === undefined)('trace source against a live MLflow server', () => {
  let mlflow: MlflowServer;
  let dir = '';
  let touchstone: ServerProcess | undefined;
  let base = '';
  let fixture: ChildProcessWithoutNullStreams | undefined;
  let fixtureLines: AsyncIterator<string>;
  let ids: Ids;
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

  async function call<T>(path: string): Promise<T> {
    const res = await fetch(`${base}${path}`);
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  /** The CLI against the running server; fails the test with its output on a non-zero exit. */
  function touchstoneCli(args: string[]): string {
    const r = cli([...args, '--server', base]);
    if (r.code !== 0) {
      throw new Error(`touchstone ${args.join(' ')}: exit ${r.code}\n${r.stdout}${r.stderr}`);
    }
    return r.stdout;
  }

  async function assessments(...traceIds: string[]): Promise<Record<string, Assessment[]>> {
    const out = await runPython(mlflow.python, ['-c', READ_ASSESSMENTS, mlflow.base, ...traceIds]);
    return JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as Record<string, Assessment[]>;
  }

  const byName = (list: Assessment[] | undefined) =>
    Object.fromEntries((list ?? []).map((a) => [a.name, a]));

  const sourceStatus = (): SourceStatus =>
    (JSON.parse(touchstoneCli(['source', 'get', SOURCE])) as { status: SourceStatus }).status;

  /** The scored metrics of the policy's results for a trace, as Touchstone stores them. */
  async function touchstoneScores(storeId: string): Promise<Score[]> {
    const entry = await call<TraceScores>(`/v1alpha1/traces/${storeId.slice(3)}/scores`);
    return (entry.results[POLICY] ?? [])
      .filter((r) => r.outcome === 'OUTCOME_SCORED')
      .flatMap((r) => r.scores);
  }

  /** Every scored metric is one CODE assessment from `touchstone/<policy>` with its value and explanation. */
  function expectWrittenBack(mine: Assessment[] | undefined, scores: Score[]): void {
    expect(scores.length).toBeGreaterThan(0);
    expect(
      (mine ?? [])
        .map(({ id: _i, updated: _u, ...a }) => a)
        .sort((a, b) => a.name.localeCompare(b.name)),
    ).toEqual(
      scores
        .map((s) => ({
          name: s.name,
          value: assessmentValue(s),
          source_type: 'CODE',
          source_id: `touchstone/${POLICY}`,
          rationale: s.explanation ?? null,
          valid: true,
        }))
        .sort((a, b) => a.name.localeCompare(b.name)),
    );
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-mlflow-source-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        'log_level: warn',
        'online:',
        '  poll_interval: 100ms',
        // A scoring attempt that fails is retried after this (default 60 s).
        '  visibility_timeout: 3s',
        'sources:',
        "  allow_hosts: ['127.0.0.1']",
        '',
      ].join('\n'),
    );
    // MLflow takes 10–30 s (migrations); touchstone starts meanwhile.
    const [m, t] = await Promise.allSettled([
      startMlflowServer(MLFLOW_PYTHON as string),
      startServer([
        '--data-dir',
        join(dir, 'data'),
        '--listen',
        `127.0.0.1:${port}`,
        '--config',
        join(dir, 'config.yaml'),
      ]),
    ]);
    // Whichever started is stopped by afterAll, even when the other did not.
    if (m.status === 'fulfilled') mlflow = m.value;
    if (t.status === 'fulfilled') touchstone = t.value;
    if (m.status === 'rejected') throw m.reason;
    if (t.status === 'rejected') throw t.reason;
    log(`MLflow ${mlflow.version} and touchstone up (${elapsed()})`);

    fixture = spawn(mlflow.python, [join(HERE, 'source_traces.py'), mlflow.base, EXPERIMENT], {
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    fixture.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr = (stderr + c).slice(-4000);
    });
    fixtureLines = createInterface({ input: fixture.stdout })[Symbol.asyncIterator]();
    const first = await fixtureLines.next();
    if (first.done) throw new Error(`source_traces.py ended early:\n${stderr}`);
    ids = JSON.parse(first.value) as Ids;
    log(`traces made (${elapsed()}): ${JSON.stringify(ids)}`);

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
        '  connector: mlflow',
        `  endpoint: ${mlflow.base}`,
        `  locations: [${EXPERIMENT}]`,
        '  backfill: {since: 1h}',
        `  poll: {interval: ${POLL_SECONDS}s}`,
        // The look-back every poll reads again: it must cover the agent trace until the test
        // changes it (a change to a trace older than this is not read, by design).
        '  maxTraceDuration: 5m',
        `  policies: [${POLICY}]`,
        '  writeBack: {enabled: true}',
        '',
      ].join('\n'),
    );
    expect(touchstoneCli(['source', 'apply', '-f', join(dir, 'source.yaml')])).toContain(
      `created: source ${SOURCE} (project default)`,
    );
    log(`policy and source applied (${elapsed()})`);
  }, 240_000);

  afterAll(async () => {
    if (fixture !== undefined && fixture.exitCode === null && fixture.signalCode === null) {
      fixture.kill('SIGKILL');
    }
    // The server's warnings, for the log (the assertions above say what must hold).
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
    await mlflow?.stop();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
    log(`done (${elapsed()})`);
  }, 60_000);

  // Assessment ids of the agent trace after the first write-back, by metric name.
  let firstIds: Record<string, string> = {};

  it('writes the scores of the finished traces back as MLflow assessments', async () => {
    // agent: tool-errors and step-budget's steps, tool_calls, within; plain (no tool call, so
    // tool-errors skips): the last three. Metric names are as the results carry them.
    await eventually(async () => {
      const m = await metrics(base);
      return written(m, 'created') >= 7 ? true : undefined;
    }, 90_000);
    log(`first write-back done (${elapsed()})`);
    const seen = await assessments(ids.agent, ids.plain);
    const agentScores = await touchstoneScores(ids.agent);
    expect(agentScores).toEqual([
      { name: 'tool-errors', value: 0.5, explanation: '1 of 2 tool calls failed: get_time' },
      { name: 'step-budget.steps', value: 4 },
      { name: 'step-budget.tool_calls', value: 2 },
      { name: 'step-budget.within', passed: true, explanation: expect.stringContaining('steps 4') },
    ]);
    expectWrittenBack(seen[ids.agent], agentScores);
    expect(byName(seen[ids.agent])['tool-errors']).toMatchObject({
      value: 0.5,
      source_type: 'CODE',
      source_id: `touchstone/${POLICY}`,
      rationale: '1 of 2 tool calls failed: get_time',
    });
    const plainScores = await touchstoneScores(ids.plain);
    expect(plainScores.map((s) => s.name)).toEqual([
      'step-budget.steps',
      'step-budget.tool_calls',
      'step-budget.within',
    ]);
    expectWrittenBack(seen[ids.plain], plainScores);
    firstIds = Object.fromEntries((seen[ids.agent] ?? []).map((a) => [a.name, a.id]));
  }, 120_000);

  it('shows the pulled trace with label source=<name> and its trajectory', async () => {
    const view = await call<TraceView>(`/v1alpha1/traces/${ids.agent.slice(3)}`);
    expect(view.trace.labels).toMatchObject({ source: SOURCE, env: 'interop' });
    expect(view.record.trajectory.map((s) => `${s.type}:${s.name}`)).toEqual([
      'agent:travel_agent',
      'llm:ChatOpenAI',
      'tool:get_weather',
      'tool:get_time',
      'llm:ChatOpenAI',
    ]);
    const tools = view.record.trajectory.filter((s) => s.type === 'tool');
    expect(tools.map((s) => s.error ?? '')).toEqual(['', 'TimeoutError: time service timed out']);
    // MLflow's own id (`tr-<hex>`, what its UI and client show) finds the same trace and scores.
    expect(await call<TraceView>(`/v1alpha1/traces/${ids.agent}`)).toEqual(view);
    expect(await call<TraceScores>(`/v1alpha1/traces/${ids.agent}/scores`)).toEqual(
      await call<TraceScores>(`/v1alpha1/traces/${ids.agent.slice(3)}/scores`),
    );
  });

  it('defers the running trace', () => {
    const status = sourceStatus();
    expect(status).toMatchObject({ phase: 'tailing' });
    expect(status.deferred).toBeGreaterThanOrEqual(1);
    expect(status.lastError).toBeUndefined();
  });

  it('re-polling writes nothing new', async () => {
    const before = await metrics(base);
    const seenBefore = await assessments(ids.agent, ids.plain);
    // Three more polls: each lists both finished traces again and skips them as unchanged.
    await eventually(
      async () => {
        const m = await metrics(base);
        return skippedUnchanged(m) >= skippedUnchanged(before) + 6 ? true : undefined;
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
    expect(written(after, 'updated')).toBe(0);
    expect(pulledTotal(after)).toBe(pulledTotal(before));
    expect(pulledTotal(after)).toBeGreaterThanOrEqual(2);
    // Same assessments, same values, not touched (last_update_time unchanged).
    expect(await assessments(ids.agent, ids.plain)).toEqual(seenBefore);
    log(`re-polled without writing (${elapsed()})`);
  }, 60_000);

  it('a changed trace is scored again and its assessments are updated in place', async () => {
    const before = await metrics(base);
    await runPython(mlflow.python, ['-c', CHANGE_TRACE, mlflow.base, ids.agent, ids.experiment_id]);
    const scores = await eventually(async () => {
      const s = await touchstoneScores(ids.agent);
      return s.find((x) => x.name === 'step-budget.steps')?.value === 5 ? s : undefined;
    }, 60_000);
    // The record changed (label reviewed=yes, a third tool call, failed): every metric changed.
    expect(scores).toEqual([
      { name: 'tool-errors', value: 2 / 3, explanation: '2 of 3 tool calls failed: get_time' },
      { name: 'step-budget.steps', value: 5 },
      { name: 'step-budget.tool_calls', value: 3 },
      { name: 'step-budget.within', passed: true, explanation: expect.stringContaining('steps 5') },
    ]);
    await eventually(async () => {
      const m = await metrics(base);
      return written(m, 'updated') >= written(before, 'updated') + 4 ? true : undefined;
    }, 30_000);
    log(`re-scored and updated (${elapsed()})`);
    const seen = (await assessments(ids.agent))[ids.agent];
    expectWrittenBack(seen, scores);
    // Updated in place: the same assessment ids, no new assessment.
    expect(Object.fromEntries((seen ?? []).map((a) => [a.name, a.id]))).toEqual(firstIds);
    const m = await metrics(base);
    expect(written(m, 'created')).toBe(written(before, 'created'));

    const view = await call<TraceView>(`/v1alpha1/traces/${ids.agent.slice(3)}`);
    expect(view.trace.labels).toMatchObject({ source: SOURCE, env: 'interop', reviewed: 'yes' });
    expect(
      view.record.trajectory
        .filter((s) => s.type === 'tool')
        .map((s) => `${s.name}:${s.error ?? ''}`),
    ).toEqual([
      'get_weather:',
      'get_time:TimeoutError: time service timed out',
      'get_time:TimeoutError: time service timed out',
    ]);
  }, 90_000);

  it('scores the running trace once it ends', async () => {
    const before = await metrics(base);
    (fixture as ChildProcessWithoutNullStreams).stdin.write('end\n');
    const ended = await fixtureLines.next();
    expect(ended.done ? undefined : JSON.parse(ended.value)).toEqual({ ended: ids.running });
    await eventually(async () => {
      const m = await metrics(base);
      return written(m, 'created') >= written(before, 'created') + 4 ? true : undefined;
    }, 60_000);
    log(`running trace scored after it ended (${elapsed()})`);
    const scores = await touchstoneScores(ids.running);
    expect(scores.slice(0, 3)).toEqual([
      { name: 'tool-errors', value: 0, explanation: '0 of 2 tool calls failed' },
      { name: 'step-budget.steps', value: 2 },
      { name: 'step-budget.tool_calls', value: 2 },
    ]);
    expectWrittenBack((await assessments(ids.running))[ids.running], scores);
    const view = await call<TraceView>(`/v1alpha1/traces/${ids.running.slice(3)}`);
    expect(view.trace.labels).toMatchObject({ source: SOURCE });
    expect(view.record.trajectory.map((s) => `${s.type}:${s.name}`)).toEqual([
      'agent:long_task',
      'tool:step-1',
      'tool:step-2',
    ]);
    expect(sourceStatus().deferred).toBe(0);
  }, 90_000);

  it('`touchstone source list` shows the source tailing with its counts', async () => {
    const status = sourceStatus();
    // Pulled: agent (read, then read again once changed), plain, running (once it ended). A
    // poll between the two requests MLflow's SDK makes when a trace ends (its spans, then its
    // finalized info) may read the running trace twice; its second read scores nothing new.
    expect(status.pulled).toBeGreaterThanOrEqual(4);
    // Written back: 7 created at first, 4 updated, 4 created for the running trace.
    expect(status.scored).toBe(15);
    const out = touchstoneCli(['source', 'list']);
    const header = out.split('\n')[0] ?? '';
    expect(header.split(/\s{2,}/)).toEqual([
      'SOURCE',
      'CONNECTOR',
      'PHASE',
      'LAG',
      'PULLED',
      'SCORED',
      'LAST ERROR',
    ]);
    const row = out.split('\n').find((l) => l.startsWith(`default/${SOURCE}`)) ?? '';
    expect(row.trim().split(/\s+/)).toEqual([
      `default/${SOURCE}`,
      'mlflow',
      'tailing',
      expect.stringMatching(/^\d+s$/),
      String(status.pulled),
      '15',
    ]);
  }, 30_000);

  it('writes a person’s annotation of a pulled trace back as a HUMAN assessment, and a change in place', async () => {
    const annotate = (...flags: string[]) =>
      touchstoneCli(['traces', 'annotate', ids.plain.slice(3), '--name', 'answer-ok', ...flags]);
    const human = async () =>
      (await assessments(ids.plain))[ids.plain]?.find((a) => a.source_type === 'HUMAN');
    annotate('--fail', '--comment', 'the answer names the wrong city');
    const created = await eventually(human, 60_000);
    expect(created).toMatchObject({
      name: 'answer-ok',
      value: false,
      source_type: 'HUMAN',
      // No auth on loopback: the caller is anonymous.
      source_id: 'touchstone/@human/anonymous',
      rationale: 'the answer names the wrong city',
      valid: true,
    });
    // Annotating the same name again updates the same assessment.
    annotate('--pass');
    const updated = await eventually(async () => {
      const a = await human();
      return a?.value === true ? a : undefined;
    }, 60_000);
    expect(updated.id).toBe(created?.id);
    expect(
      (await assessments(ids.plain))[ids.plain]?.filter((a) => a.source_type === 'HUMAN'),
    ).toHaveLength(1);
    log(`annotation written back (${elapsed()})`);
  }, 150_000);
});
