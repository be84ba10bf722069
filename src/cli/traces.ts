import type { Command } from 'commander';
import type { EvalRecord, TraceSummary } from '../core/index.js';
import type { AnnotationService, AnnotationView } from '../policies/index.js';
import type { Store, StoredTrace } from '../store/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, table } from './io.js';
import { configFromFlags } from './serve.js';
import { type LocalKit, type TargetFlags, targetOptions, withTarget } from './target.js';
import { traceView } from './trace-view.js';

interface AnnotateFlags extends TargetFlags {
  project?: string;
  name: string;
  value?: string;
  pass?: boolean;
  fail?: boolean;
  label?: string;
  comment?: string;
  idempotencyKey?: string;
  config?: string;
  dataDir?: string;
}

/** The request body of `traces annotate`: exactly one of --value, --pass, --fail, --label. */
function annotationBody(flags: AnnotateFlags): Record<string, unknown> {
  const given = [
    flags.value !== undefined,
    flags.pass === true,
    flags.fail === true,
    flags.label !== undefined,
  ].filter(Boolean).length;
  if (given !== 1) {
    throw new CliExit(
      EXIT.USAGE,
      'give exactly one of --value <0-1>, --pass, --fail, --label <text>',
    );
  }
  const body: Record<string, unknown> = { name: flags.name };
  if (flags.value !== undefined) {
    const value = Number(flags.value);
    if (flags.value.trim() === '' || !Number.isFinite(value)) {
      throw new CliExit(EXIT.USAGE, '--value must be a number from 0 to 1');
    }
    body.value = value;
  }
  if (flags.pass === true) body.passed = true;
  if (flags.fail === true) body.passed = false;
  if (flags.label !== undefined) body.label = flags.label;
  if (flags.comment !== undefined) body.comment = flags.comment;
  return body;
}

/**
 * Annotation on the local data dir, as the server would store it: its outbox and write-back
 * queue are filled in the same transaction, and a server started on the data dir sends them.
 */
function localAnnotations(
  flags: AnnotateFlags,
  io: CliIO,
  store: Store,
  kit: LocalKit,
): AnnotationService {
  const config = configFromFlags(flags, io);
  const redactor = kit.compileRedaction(config.traces.redaction);
  const clock = kit.systemClock;
  return new kit.AnnotationService({
    store,
    clock,
    traces: new kit.TraceQueries(store),
    events: new kit.WebhookOutbox({ clock }),
    sinks: [
      new kit.SourceResultSink({ directory: new kit.SourceDirectory({ store, clock }), clock }),
    ],
    redactText: (text) => redactor.redactText(text),
  });
}

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
      async (store, kit) =>
        (
          await new kit.TraceQueries(store).list(
            kit.OPEN_PRINCIPAL,
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
      (store, kit) => new kit.TraceQueries(store).get(kit.OPEN_PRINCIPAL, flags.project, traceId),
    );
    // Scripts that pipe the output keep getting the JSON they always got.
    const tree = flags.tree === true || (flags.json !== true && io.stdout.isTTY === true);
    io.stdout.write(tree ? `${traceView(found)}\n` : `${JSON.stringify(found, null, 2)}\n`);
  });

  targetOptions(
    traces
      .command('annotate')
      .description(
        "Add your score to a trace under a name: a number from 0 to 1, pass or fail, or a label, with an optional comment. Annotating the same name again replaces your earlier score; others' stay.",
      )
      .argument('<trace-id>', 'trace id')
      .requiredOption('--name <name>', 'what the score is about (1-64 letters, digits, _ . -)')
      .option('--value <number>', 'a number from 0 to 1')
      .option('--pass', 'the trace passes')
      .option('--fail', 'the trace fails')
      .option('--label <text>', 'a label (at most 256 characters)')
      .option('--comment <text>', 'why (at most 4096 characters; redacted as trace text is)')
      .option('-p, --project <name>', 'project')
      .option(
        '--idempotency-key <key>',
        'with a server: retry safely, the same key and annotation answer the first outcome',
      ),
  ).action(async (traceId: string, flags: AnnotateFlags) => {
    const body = annotationBody(flags);
    const saved = await withTarget<AnnotationView>(
      flags,
      io,
      (c) =>
        c.call(
          'POST',
          `v1alpha1/traces/${encodeURIComponent(traceId)}/annotations${flags.project === undefined ? '' : `?project=${encodeURIComponent(flags.project)}`}`,
          body,
          flags.idempotencyKey === undefined ? {} : { 'idempotency-key': flags.idempotencyKey },
        ),
      (store, kit) =>
        localAnnotations(flags, io, store, kit).annotate(
          kit.OPEN_PRINCIPAL,
          flags.project,
          traceId,
          body,
        ),
    );
    if (flags.json) {
      io.stdout.write(`${JSON.stringify(saved, null, 2)}\n`);
      return;
    }
    const score = saved.result.scores[0];
    const shown =
      score?.passed !== undefined
        ? score.passed
          ? 'pass'
          : 'fail'
        : String(score?.value ?? score?.label ?? '');
    io.stdout.write(
      `annotated: trace ${saved.traceId} (project ${saved.project}) ${saved.result.evaluator}=${shown} by ${saved.result.annotator?.principal ?? ''}\n`,
    );
  });
}
