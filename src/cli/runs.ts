import type { Command } from 'commander';
import type { LocalRuns } from '../app/index.js';
import type { Principal } from '../auth/index.js';
import type { RunService, RunView } from '../runs/index.js';
// A leaf of words (imports nothing), so commands talking to a server do not load the runs area.
import { isFinal } from '../runs/states.js';
import type { ApiClient } from './client.js';
import { EXIT, type ExitCode } from './exit-codes.js';
import { type CliIO, table } from './io.js';
import { callNamed, listResources, printResult, type ResourceFlags } from './resources.js';
import { configFromFlags, type ServerFlags } from './serve.js';
import { type LocalKit, remoteOrLocal, targetOptions } from './target.js';

/**
 * `touchstone runs list|get|cancel|delete`, the run report both `run` and `runs get` print, and
 * the embedded backend `touchstone run` uses without a server.
 */

/** The Run JSON, as REST answers it and as the local service returns it. */
export type RunJson = RunView;

/** `RUN_STATUS_SUCCEEDED` → `SUCCEEDED`. */
export function statusText(status: string): string {
  return status.replace(/^RUN_STATUS_/, '');
}

/** The exit code a finished run deserves (DECISIONS: CLI exit codes). */
export function exitCodeFor(status: string): ExitCode {
  if (status === 'RUN_STATUS_SUCCEEDED') return EXIT.OK;
  if (status === 'RUN_STATUS_FAILED') return EXIT.GATE_FAILED;
  return EXIT.ERROR;
}

export function fmt(value: number | null | undefined, digits = 3): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '-';
  const rounded = Number(value.toFixed(digits));
  return Math.abs(rounded) >= 1e6 ? rounded.toExponential(2) : String(rounded);
}

export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '-';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

interface SummaryJson {
  metric: string;
  kind?: string;
  n?: number;
  mean?: number | null;
  interval?: { low: number; high: number } | null;
  counts?: { scored: number; skipped: number; error: number };
  labels?: Record<string, number>;
  passAtK?: Record<string, number | null>;
  passHatK?: Record<string, number | null>;
}

interface GateJson {
  gate: { metric: string; min?: number; max?: number };
  passed: boolean;
  value: number | null;
  reason?: string;
}

function kValues(values: Record<string, number | null> | undefined): string {
  if (values === undefined) return '-';
  return Object.entries(values)
    .map(([k, v]) => `${k}:${fmt(v, 2)}`)
    .join(' ');
}

/**
 * One row per metric: scored values, mean, 95% interval, results by outcome, and with trials
 * pass@k and pass^k for k = 1…trials (`1:0.9 2:0.8 3:0.7`).
 */
export function summaryTable(run: RunJson): string {
  const summaries = (run.summaries ?? []) as unknown as SummaryJson[];
  if (summaries.length === 0) return '(no summaries)';
  const trials = summaries.some((s) => s.passAtK !== undefined || s.passHatK !== undefined);
  const headers = ['METRIC', 'N', 'MEAN', '95% CI'];
  if (trials) headers.push('PASS@K', 'PASS^K');
  headers.push('SCORED/SKIPPED/ERROR');
  const rows = summaries.map((s) => {
    const labels = Object.entries(s.labels ?? {})
      .slice(0, 3)
      .map(([label, n]) => `${label}=${n}`)
      .join(' ');
    const row = [
      s.metric,
      String(s.n ?? 0),
      s.kind === 'label' ? labels || '-' : fmt(s.mean),
      s.interval ? `[${fmt(s.interval.low)}, ${fmt(s.interval.high)}]` : '-',
    ];
    if (trials) row.push(kValues(s.passAtK), kValues(s.passHatK));
    const c = s.counts;
    row.push(c === undefined ? '-' : `${c.scored}/${c.skipped}/${c.error}`);
    return row;
  });
  return table(headers, rows);
}

/** One line per gate: `✓ exact-match.pass^3 >= 0.5 (value 0.667)`. */
export function gateLines(run: RunJson): string[] {
  return ((run.gates ?? []) as unknown as GateJson[]).map((g) => {
    const bound =
      g.gate.min !== undefined ? `>= ${fmt(g.gate.min, 6)}` : `<= ${fmt(g.gate.max, 6)}`;
    const value = g.value === null ? (g.reason ?? 'no value') : `value ${fmt(g.value)}`;
    return `${g.passed ? '✓' : '✗'} ${g.gate.metric} ${bound} (${value})`;
  });
}

/** The report of a run: status line, error, summary table and gates. */
export function runReport(run: RunJson): string {
  const took =
    run.startedAt !== undefined && run.finishedAt !== undefined
      ? ` in ${duration(Date.parse(run.finishedAt) - Date.parse(run.startedAt))}`
      : '';
  const lines = [
    `run ${run.id} "${run.name}" (project ${run.project}): ${statusText(run.status)}${took}, ${run.progress.done}/${run.progress.total} items`,
  ];
  if (run.error !== undefined) lines.push(`error: ${run.error}`);
  if (isFinal(run.status)) lines.push('', summaryTable(run));
  const gates = gateLines(run);
  if (gates.length > 0) lines.push('', 'gates:', ...gates.map((g) => `  ${g}`));
  return lines.join('\n');
}

/**
 * Opens the local data dir's runs, built as the server builds them. A spec run here executes on
 * the caller's own machine, so its target gets what the caller has: every variable of the
 * environment, command targets, and its own host even on loopback or a private network
 * (docs/runs.md, "Where a target may run").
 */
export function openLocalRuns(
  kit: LocalKit,
  flags: ServerFlags,
  io: CliIO,
  options: { baseDir?: string } = {},
): Promise<LocalRuns> {
  return kit.createLocalRuns(configFromFlags(flags, io), { env: io.env, ...options });
}

type Flags = ResourceFlags;

/** Runs against a server (`--server` / TOUCHSTONE_SERVER), or on the local data dir. */
function withRuns<T>(
  flags: Flags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (service: RunService, caller: Principal) => Promise<T>,
): Promise<T> {
  return remoteOrLocal(flags, io, remote, async () => {
    const kit = await import('./local.js');
    const runs = await openLocalRuns(kit, flags, io);
    try {
      return await local(runs.service, kit.OPEN_PRINCIPAL);
    } finally {
      await runs.close();
    }
  });
}

function gateSummary(run: RunJson): string {
  const gates = (run.gates ?? []) as unknown as GateJson[];
  if (gates.length === 0) return '-';
  const failed = gates.filter((g) => !g.passed).length;
  return failed === 0 ? `${gates.length} passed` : `${failed}/${gates.length} failed`;
}

export function runsCommand(program: Command, io: CliIO): void {
  const runs = program
    .command('runs')
    .description('List, show, cancel and delete offline runs (start one with `touchstone run`).');

  targetOptions(
    runs
      .command('list')
      .description("List a project's runs, newest first.")
      .option('-p, --project <name>', 'project'),
  ).action(async (flags: Flags) => {
    await listResources<RunJson>(
      withRuns,
      flags,
      io,
      'runs',
      ['ID', 'NAME', 'PROJECT', 'STATUS', 'PROGRESS', 'GATES', 'CREATED', 'FINISHED'],
      (r) => [
        r.id,
        r.name,
        r.project,
        statusText(r.status),
        `${r.progress.done}/${r.progress.total}`,
        gateSummary(r),
        r.createdAt,
        r.finishedAt ?? '-',
      ],
    );
  });

  targetOptions(
    runs
      .command('get')
      .description('Show a run: status, summaries and gates (--json: the run with its spec).')
      .argument('<id>')
      .option('-p, --project <name>', 'project'),
  ).action(async (id: string, flags: Flags) => {
    const run = await callNamed(withRuns, flags, io, 'runs', id, 'get');
    printResult(io, flags, run, runReport(run));
  });

  targetOptions(
    runs
      .command('cancel')
      .description('Cancel a pending or running run (a final run is left as it is).')
      .argument('<id>')
      .option('-p, --project <name>', 'project'),
  ).action(async (id: string, flags: Flags) => {
    const run = await callNamed(withRuns, flags, io, 'runs', id, 'cancel');
    printResult(
      io,
      flags,
      run,
      isFinal(run.status)
        ? `run ${run.id} is ${statusText(run.status)}`
        : `cancelling run ${run.id}: it stops after the items in progress`,
    );
  });

  targetOptions(
    runs
      .command('delete')
      .description(
        'Delete a finished run with its outputs and results (refused while it is pending, running or leased).',
      )
      .argument('<id>')
      .option('-p, --project <name>', 'project'),
  ).action(async (id: string, flags: Flags) => {
    const run = await callNamed(withRuns, flags, io, 'runs', id, 'delete');
    printResult(io, flags, run, `deleted run ${id}`);
  });
}
