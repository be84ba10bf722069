import type { Command } from 'commander';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import type { EvalRecord, TraceSummary } from '../core/index.js';
import { TraceQueries } from '../ingest/index.js';
import type { StoredTrace } from '../store/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, table } from './io.js';
import { type TargetFlags, targetOptions, withTarget } from './target.js';
import { traceView } from './trace-view.js';

interface ListFlags extends TargetFlags {
  project?: string;
  service?: string;
  name?: string;
  since?: string;
  until?: string;
  label?: string[];
  error?: boolean;
  source?: string;
  limit: string;
  quiet?: boolean;
}

export function labelMap(pairs: string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CliExit(EXIT.USAGE, `--label ${pair}: expected key=value`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

export function tracesCommand(program: Command, io: CliIO): void {
  const traces = program.command('traces').description('List and show stored traces.');

  targetOptions(
    traces
      .command('list')
      .description('List completed traces, newest first.')
      .option('-p, --project <name>', 'project')
      .option('--service <name>', 'only this service')
      .option('--name <name>', 'only this root span name')
      .option('--since <time>', 'RFC 3339 lower bound on the start time')
      .option('--until <time>', 'RFC 3339 upper bound on the start time')
      .option('-l, --label <key=value...>', 'only traces with these labels')
      .option('--error', 'only traces with an error')
      .option('--source <name>', 'only traces pulled by this source')
      .option('-n, --limit <n>', 'most traces to show', '50')
      .option('-q, --quiet', 'print only the trace ids, one a line'),
  ).action(async (flags: ListFlags) => {
    const limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new CliExit(EXIT.USAGE, '--limit must be 1 to 1000');
    const labels = labelMap(flags.label);
    const filter = {
      ...(flags.project === undefined ? {} : { project: flags.project }),
      ...(flags.service === undefined ? {} : { service: flags.service }),
      ...(flags.name === undefined ? {} : { name: flags.name }),
      ...(flags.since === undefined ? {} : { since: flags.since }),
      ...(flags.until === undefined ? {} : { until: flags.until }),
      ...(flags.error === undefined ? {} : { error: true }),
      ...(flags.source === undefined ? {} : { source: flags.source }),
    };
    const items: TraceSummary[] = await withTarget(
      flags,
      io,
      async (c) => {
        const q = new URLSearchParams({ page_size: String(limit) });
        for (const [k, v] of Object.entries(filter)) q.set(k, String(v));
        for (const [k, v] of Object.entries(labels)) q.append('labels', `${k}=${v}`);
        return (await c.call<{ traces: TraceSummary[] }>('GET', `v1alpha1/traces?${q}`)).traces;
      },
      async (store) =>
        (
          await new TraceQueries(store).list(
            OPEN_PRINCIPAL,
            { ...filter, labels },
            { pageSize: limit },
          )
        ).items,
    );
    if (flags.json) {
      io.stdout.write(`${JSON.stringify(items, null, 2)}\n`);
      return;
    }
    if (flags.quiet) {
      io.stdout.write(items.map((t) => `${t.traceId}\n`).join(''));
      return;
    }
    const rows = items.map((t) => [
      t.traceId,
      t.service,
      t.name,
      t.startTime,
      `${(t.durationMs / 1000).toFixed(3)}s`,
      String(t.steps),
      t.error ? 'error' : '',
      Object.entries(t.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    ]);
    io.stdout.write(
      `${table(['TRACE', 'SERVICE', 'NAME', 'START', 'DURATION', 'STEPS', 'ERROR', 'LABELS'], rows)}\n`,
    );
  });

  targetOptions(
    traces
      .command('get')
      .description(
        'Show one trace: its summary and the trajectory as a tree of steps (on a terminal), or its full record as JSON (--json, and when piped).',
      )
      .argument('<trace-id>', '32-character hex trace id')
      .option('-p, --project <name>', 'project')
      .option('--tree', 'print the tree of steps even when piped'),
  ).action(async (traceId: string, flags: TargetFlags & { project?: string; tree?: boolean }) => {
    if (flags.json && flags.tree)
      throw new CliExit(EXIT.USAGE, '--json and --tree exclude each other');
    const found = await withTarget<{ trace: TraceSummary | StoredTrace; record: EvalRecord }>(
      flags,
      io,
      (c) =>
        c.call(
          'GET',
          `v1alpha1/traces/${encodeURIComponent(traceId)}${flags.project === undefined ? '' : `?project=${encodeURIComponent(flags.project)}`}`,
        ),
      (store) => new TraceQueries(store).get(OPEN_PRINCIPAL, flags.project, traceId),
    );
    // Scripts that pipe the output keep getting the JSON they always got.
    const tree = flags.tree === true || (flags.json !== true && io.stdout.isTTY === true);
    io.stdout.write(tree ? `${traceView(found)}\n` : `${JSON.stringify(found, null, 2)}\n`);
  });
}
