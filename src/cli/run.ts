import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import type { LocalRuns } from '../app/index.js';
import { isFinal } from '../runs/states.js';
import type { ApiClient } from './client.js';
import { EXIT, type ExitCode } from './exit-codes.js';
import { CliExit, type CliIO, readText, yamlDocuments } from './io.js';
import { ProgressDisplay, type Writable } from './progress.js';
import { exitCodeFor, openLocalRuns, type RunJson, runReport, statusText } from './runs.js';
import { type LocalKit, namedServer, outputOption, type TargetFlags } from './target.js';

/**
 * `touchstone run -f spec.yaml`: creates a run and, by default, waits for it with a progress
 * display, then prints the summaries and gates and exits 0 (SUCCEEDED), 3 (FAILED: a gate), 1
 * (ERROR, CANCELLED) or 2 (a bad spec). Without `--server` the run executes in this process on the
 * local data dir; with one, the server executes it and the CLI polls.
 */

export interface RunFlags extends TargetFlags {
  file: string;
  project?: string;
  /** `--wait` (the default) or `--no-wait`; commander leaves it unset when neither is given. */
  wait?: boolean;
  idempotencyKey?: string;
}

/** The spec file as a value; YAML syntax errors are usage errors naming line and column. */
export function readSpec(file: string, stdin: () => string): unknown {
  const values = yamlDocuments(readText(file, stdin), file);
  if (values.length !== 1) {
    throw new CliExit(
      EXIT.USAGE,
      `${file} must hold exactly one run spec (found ${values.length} documents)`,
    );
  }
  return values[0];
}

/** How the CLI reaches runs: a server over REST, or the local data dir in this process. */
export interface RunsBackend {
  /** Validates and creates the run (a bad spec throws with every bad field named). */
  create(spec: unknown, project: string | undefined): Promise<RunJson>;
  /** Resolves once the run is final, reporting progress; `signal` stops waiting. */
  wait(id: string, onProgress: (run: RunJson) => void, signal: AbortSignal): Promise<RunJson>;
  /** The run with its summaries and gates. */
  get(id: string): Promise<RunJson>;
  cancel(id: string): Promise<RunJson>;
  /** The first page of the run's results (one item per record and trial). */
  results(id: string): Promise<ResultItem[]>;
  close(): Promise<void>;
}

/** One (record, trial) of a run's results, as far as the report reads it. */
export interface ResultItem {
  recordId?: string;
  trial?: number;
  error?: string;
  results?: { evaluator: string; outcome: string; reason?: string }[];
}

/** Distinct failure reasons among results, most frequent first: why a run scored nothing. */
export function errorReasons(items: readonly ResultItem[], max = 3): string[] {
  const counts = new Map<string, number>();
  for (const item of items) {
    const reasons =
      item.error !== undefined
        ? [item.error]
        : (item.results ?? [])
            .filter((r) => r.outcome === 'OUTCOME_ERROR' && r.reason !== undefined)
            .map((r) => `${r.evaluator}: ${r.reason}`);
    for (const reason of new Set(reasons)) counts.set(reason, (counts.get(reason) ?? 0) + 1);
  }
  return [...counts]
    .sort((a, b) => b[1] - a[1])
    .slice(0, max)
    .map(([reason, n]) => `${n}× ${reason}`);
}

const POLL_MS = 1_000;
/** Results read to explain errors in the report. */
const RESULTS_SAMPLE = 200;

/** A server's runs, polled over REST. */
export function remoteRuns(
  client: ApiClient,
  project: string | undefined,
  idempotencyKey?: string,
): RunsBackend {
  const q = project === undefined ? '' : `?project=${encodeURIComponent(project)}`;
  const path = (id: string, suffix = '') => `v1alpha1/runs/${encodeURIComponent(id)}${suffix}${q}`;
  return {
    create: (spec) =>
      client.call<RunJson>(
        'POST',
        `v1alpha1/runs${q}`,
        spec,
        idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey },
      ),
    async wait(id, onProgress, signal) {
      for (;;) {
        // Polls without the spec: a run with a large inline dataset would resend it every second.
        const run = await client.call<RunJson>(
          'GET',
          `${path(id)}${q === '' ? '?' : '&'}view=basic`,
        );
        onProgress(run);
        if (isFinal(run.status)) return run;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, POLL_MS);
          function done() {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
          }
          signal.addEventListener('abort', done, { once: true });
        });
        signal.throwIfAborted();
      }
    },
    get: (id) => client.call<RunJson>('GET', path(id)),
    cancel: (id) => client.call<RunJson>('POST', path(id, ':cancel')),
    async results(id) {
      const sep = q === '' ? '?' : '&';
      const page = await client.call<{ results?: ResultItem[] }>(
        'GET',
        `${path(id, '/results')}${sep}page_size=${RESULTS_SAMPLE}`,
      );
      return page.results ?? [];
    },
    async close() {},
  };
}

/**
 * The local data dir's runs, executed in this process: the executor claims the run (and any run
 * an interrupted `touchstone run` left in the same data dir, which it resumes) and works until
 * nothing is left; progress is read from the store as the executor writes it.
 */
export function localRuns(runs: LocalRuns, kit: LocalKit): RunsBackend {
  const { OPEN_PRINCIPAL, runView } = kit;
  let draining: Promise<void> | undefined;
  return {
    create: (spec, project) =>
      runs.service.create(OPEN_PRINCIPAL, spec, project === undefined ? {} : { project }),
    async wait(id, onProgress, signal) {
      draining ??= runs.executor.drain();
      const following = new AbortController();
      const onAbort = () => following.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      const follow = runs.executor.waitFor(id, {
        onProgress: (r) => onProgress(runView(r, false)),
        signal: following.signal,
      });
      const drained = draining.then(async () => {
        // Nothing left to claim: the run is final, or its execution failed and it stays leased.
        const run = await runs.service.progress(OPEN_PRINCIPAL, undefined, id);
        if (!isFinal(run.status)) {
          const cause = runs.executor.failureOf(id);
          throw new CliExit(
            EXIT.ERROR,
            `run ${id} stopped before finishing (${statusText(run.status)})${cause === undefined ? '' : `: its execution failed (${cause})`}; run \`touchstone run\` again on this data dir to resume it once its lease lapses`,
          );
        }
      });
      try {
        await Promise.race([follow, drained]);
        return runView(await follow, false);
      } finally {
        signal.removeEventListener('abort', onAbort);
        following.abort();
        follow.catch(() => undefined);
        drained.catch(() => undefined);
      }
    },
    get: (id) => runs.service.get(OPEN_PRINCIPAL, undefined, id),
    cancel: (id) => runs.service.cancel(OPEN_PRINCIPAL, undefined, id),
    async results(id) {
      const page = await runs.service.results(OPEN_PRINCIPAL, undefined, id, {
        pageSize: RESULTS_SAMPLE,
      });
      return page.items as ResultItem[];
    },
    close: () => runs.close(),
  };
}

export function runCommand(program: Command, io: CliIO, stdin: () => string): void {
  program
    .command('run')
    .description(
      'Run an evaluation from a run spec and wait for it; exit 0 when it SUCCEEDED, 3 when a gate failed, 1 on ERROR or CANCELLED, 2 on a bad spec.',
    )
    .requiredOption('-f, --file <file>', 'run spec, YAML or JSON (- for stdin)')
    .option('-p, --project <name>', 'project, unless the spec names one')
    .option(
      '--server <url>',
      'server URL or HOST:PORT (default: $TOUCHSTONE_SERVER; without one the run executes here, on the local data dir)',
    )
    .option('--wait', 'wait until the run is final (the default)')
    .option('--no-wait', 'with --server: print the created run and return at once')
    .option('-c, --config <file>', 'YAML config file (embedded mode: judges, grants)')
    .option('--data-dir <dir>', 'data directory (embedded mode, default ./.touchstone)')
    .option('--json', 'print the final run as JSON')
    .addOption(outputOption())
    .option(
      '--idempotency-key <key>',
      'with --server: create the run under this Idempotency-Key, so a retried command (e.g. a re-run CI job with the same key) gets the same run instead of a second one',
    )
    .action(async (flags: RunFlags) => {
      const code = await runSpec(flags, io, stdin);
      if (code !== EXIT.OK) throw new CliExit(code, '');
    });
}

/** The whole `run` command; resolves to its exit code. */
export async function runSpec(flags: RunFlags, io: CliIO, stdin: () => string): Promise<ExitCode> {
  const spec = readSpec(flags.file, stdin);
  const client = namedServer(flags, io);
  const remote = client !== undefined;
  const wait = flags.wait !== false;
  if (!remote && !wait) {
    throw new CliExit(
      EXIT.USAGE,
      '--no-wait needs --server: without a server the run executes in this process',
    );
  }
  let backend: RunsBackend;
  let where: string;
  if (client !== undefined) {
    backend = remoteRuns(client, flags.project, flags.idempotencyKey);
    where = `on ${client.baseUrl}`;
  } else {
    const kit = await import('./local.js');
    const local = await openLocalRuns(kit, flags, io, {
      baseDir: flags.file === '-' ? resolve('.') : dirname(resolve(flags.file)),
    });
    backend = localRuns(local, kit);
    where = `executing here, on the ${local.location}`;
  }
  try {
    const created = await backend.create(spec, flags.project);
    if (!wait) {
      io.stdout.write(
        flags.json
          ? `${JSON.stringify(created, null, 2)}\n`
          : `created run ${created.id} (${statusText(created.status)}); follow it with: touchstone runs get ${created.id}\n`,
      );
      return EXIT.OK;
    }
    const progress = new ProgressDisplay(io.stderr as Writable);
    io.stderr.write(`run ${created.id} "${created.name}" (project ${created.project}) ${where}\n`);
    const stop = new AbortController();
    let interrupted = false;
    io.onShutdownSignal(async () => {
      interrupted = true;
      if (remote) {
        stop.abort();
        return;
      }
      // Embedded: the run cannot continue without this process, so it is cancelled.
      await backend.cancel(created.id).catch(() => undefined);
    });
    let final: RunJson;
    try {
      final = await backend.wait(
        created.id,
        (run) =>
          progress.update(
            run.progress.done,
            run.progress.total,
            statusText(run.status).toLowerCase(),
          ),
        stop.signal,
      );
    } catch (err) {
      progress.end();
      if (interrupted && remote) {
        io.stderr.write(
          `stopped waiting; run ${created.id} continues on the server (touchstone runs cancel ${created.id} stops it)\n`,
        );
        return EXIT.ERROR;
      }
      throw err;
    }
    progress.end();
    const full = await backend.get(final.id);
    if (flags.json) {
      io.stdout.write(`${JSON.stringify(full, null, 2)}\n`);
      return exitCodeFor(full.status);
    }
    let report = runReport(full);
    const failed = ((full.summaries ?? []) as unknown as { counts?: { error: number } }[]).some(
      (s) => (s.counts?.error ?? 0) > 0,
    );
    if (failed) {
      const reasons = errorReasons(await backend.results(full.id).catch(() => []));
      if (reasons.length > 0) {
        report += `\n\nmost frequent errors (GET /v1alpha1/runs/${full.id}/results lists every item):\n${reasons.map((r) => `  ${r}`).join('\n')}`;
      }
    }
    io.stdout.write(`${report}\n`);
    return exitCodeFor(full.status);
  } finally {
    await backend.close();
  }
}
