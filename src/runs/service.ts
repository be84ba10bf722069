import { type AuditLogger, audited, authorize, type Principal } from '../auth/index.js';
import { type Clock, type ErrorDetail, isTouchstoneError, newId } from '../core/index.js';
import type { EvaluatorRegistry } from '../evaluators/index.js';
import type { Page, PageRequest, RunRecord, Store } from '../store/index.js';
import { RunErrors } from './error-codes.js';
import type { DatasetReader } from './executor.js';
import { finishRun, type RunEventSink } from './finish.js';
import { KEEP_LABEL, MAX_ITEMS, type ParsedRun, parseRunSpec, type RunSpec } from './spec.js';
import { isFinal } from './states.js';
import { itemView, type RunView, runView } from './view.js';

export interface RunServiceDeps {
  store: Store;
  clock: Clock;
  registry: EvaluatorRegistry;
  /** Whether a judge of this name is configured. */
  judgeExists(name: string): boolean;
  events: RunEventSink;
  logger: AuditLogger;
  /** Reads `dataset.path` datasets (checked at create). Absent: only inline records. */
  datasets?: DatasetReader;
  /**
   * Checks a spec's target may run here (grants, command targets, outbound hosts), throwing a
   * TouchstoneError naming the field. Absent: specs with a target are refused.
   */
  preflightTarget?(spec: RunSpec, project: string): Promise<void>;
  /** A run was created: the executor looks at once. */
  onCreated?: () => void;
}

/** Every problem of an error, with the spec's field paths under `spec.` for declarative specs. */
function prefixed(err: unknown, prefix: string, fallback: string): ErrorDetail[] {
  if (!isTouchstoneError(err)) throw err;
  const details = err.details.length > 0 ? err.details : [{ path: fallback, message: err.message }];
  return details.map((d) => ({ path: `${prefix}${d.path}`, message: d.message }));
}

/**
 * The run operations behind REST and the CLI: create (everything validated before the run is
 * stored), get, list, results, cancel and delete. Creating and deleting are audited by run.
 */
export class RunService {
  constructor(private readonly deps: RunServiceDeps) {}

  /** Validates a spec (shape, evaluators, judge, gates) without authorizing or storing anything. */
  parse(input: unknown): ParsedRun {
    return parseRunSpec(input, {
      registry: this.deps.registry,
      judgeExists: (name) => this.deps.judgeExists(name),
    });
  }

  /**
   * Checks everything a run needs before it is stored (the spec, the caller's permission, the
   * dataset, the target's grants and hosts) and, unless `validateOnly`, creates it PENDING.
   */
  async create(
    caller: Principal,
    input: unknown,
    options: { project?: string; validateOnly?: boolean } = {},
  ): Promise<RunView> {
    const parsed = this.parse(input);
    const requested = parsed.project ?? options.project;
    const check = async () => {
      const project = authorize(caller, 'runs.create', requested);
      await this.checkResources(parsed, project);
      return project;
    };
    if (options.validateOnly === true) {
      const project = await check();
      const now = new Date(this.deps.clock.now()).toISOString();
      return runView({
        id: '',
        project,
        name: parsed.name,
        labels: parsed.labels,
        status: 'RUN_STATUS_PENDING',
        spec: parsed.stored,
        createdBy: caller.id,
        createdAt: now,
        total: 0,
        done: 0,
        cancelRequested: false,
      });
    }
    return audited(
      this.deps.logger,
      caller,
      'runs.create',
      requested,
      { run: parsed.name },
      async () => {
        const project = await check();
        const run = await this.deps.store.withTransaction((tx) =>
          tx.runs.create({
            id: newId('run'),
            project,
            name: parsed.name,
            labels: parsed.labels,
            keep: parsed.labels[KEEP_LABEL] === 'true',
            spec: parsed.stored,
            createdBy: caller.id,
            createdAt: this.deps.clock.now(),
          }),
        );
        this.deps.onCreated?.();
        return runView(run);
      },
    );
  }

  /** The dataset exists and fits, and the target may run here (grants, hosts, command targets). */
  private async checkResources(parsed: ParsedRun, project: string): Promise<void> {
    const { spec } = parsed;
    const prefix = parsed.declarative ? 'spec.' : '';
    const details: ErrorDetail[] = [];
    if (spec.dataset.path !== undefined) {
      if (this.deps.datasets === undefined) {
        details.push({
          path: `${prefix}dataset.path`,
          message: 'this server has no datasets; give the records inline',
        });
      } else {
        try {
          const records = await this.deps.datasets.read(project, spec.dataset.path);
          if (records.length === 0) {
            details.push({ path: `${prefix}dataset.path`, message: 'the dataset has no records' });
          } else if (records.length * spec.trials > MAX_ITEMS) {
            details.push({
              path: `${prefix}trials`,
              message: `records × trials is ${records.length * spec.trials}; at most ${MAX_ITEMS}`,
            });
          }
        } catch (err) {
          if (isTouchstoneError(err) && err.retryable) throw err;
          details.push(...prefixed(err, prefix, 'dataset.path'));
        }
      }
    }
    if (spec.target !== undefined) {
      if (this.deps.preflightTarget === undefined) {
        details.push({
          path: `${prefix}target`,
          message: 'this server does not run targets; run the spec with the CLI',
        });
      } else {
        try {
          await this.deps.preflightTarget(spec, project);
        } catch (err) {
          details.push(...prefixed(err, prefix, 'target'));
        }
      }
    }
    if (details.length > 0) {
      throw RunErrors.RUN_SPEC_INVALID(
        `invalid run spec: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`,
        { details },
      );
    }
  }

  async get(caller: Principal, project: string | undefined, id: string): Promise<RunView> {
    return runView(await this.find(caller, 'runs.read', project, id));
  }

  /** Status and progress only (no spec): what the CLI polls. */
  async progress(caller: Principal, project: string | undefined, id: string): Promise<RunView> {
    return runView(await this.find(caller, 'runs.read', project, id, false), false);
  }

  async list(
    caller: Principal,
    project: string | undefined,
    page: PageRequest,
  ): Promise<Page<RunView>> {
    const p = authorize(caller, 'runs.read', project);
    const result = await this.deps.store.runs.list(p, page);
    return { ...result, items: result.items.map((r) => runView(r, false)) };
  }

  /** The run's results, one entry per (record, trial), by record then trial. */
  async results(
    caller: Principal,
    project: string | undefined,
    id: string,
    page: PageRequest,
  ): Promise<Page<Record<string, unknown>>> {
    const run = await this.find(caller, 'runs.read', project, id, false);
    const result = await this.deps.store.runs.results(run.id, page);
    return { ...result, items: result.items.map(itemView) };
  }

  /**
   * Cancels a run: a pending run (or a running one whose executor is gone) becomes CANCELLED at
   * once; a running one is asked to stop and becomes CANCELLED at its executor's next write,
   * with what it finished summarised. A final run is returned as it is.
   */
  async cancel(caller: Principal, project: string | undefined, id: string): Promise<RunView> {
    return audited(this.deps.logger, caller, 'runs.cancel', project, { run: id }, async () => {
      const run = await this.find(caller, 'runs.create', project, id);
      if (isFinal(run.status)) return runView(run, false);
      await this.deps.store.runs.requestCancel(run.id);
      const finished = await finishRun(this.deps, run, undefined, { cancelled: true });
      const now = await this.deps.store.runs.get(run.id, { spec: false });
      return runView(finished ?? now ?? run, false);
    });
  }

  /** Deletes a final run with its outputs and results; refused while pending, running or leased. */
  async delete(caller: Principal, project: string | undefined, id: string): Promise<RunView> {
    return audited(this.deps.logger, caller, 'runs.delete', project, { run: id }, async () => {
      const run = await this.find(caller, 'runs.delete', project, id, false);
      const outcome = await this.deps.store.withTransaction((tx) =>
        tx.runs.delete(run.id, this.deps.clock.now()),
      );
      if (outcome === 'not_found') throw RunErrors.RUN_NOT_FOUND(`no run ${id}`);
      if (outcome === 'not_finished') {
        throw RunErrors.RUN_NOT_FINISHED(
          `run ${id} is ${run.status === 'RUN_STATUS_PENDING' ? 'pending' : isFinal(run.status) ? 'still leased by an executor' : 'running'}; cancel it and delete it once it is final`,
        );
      }
      return runView(run, false);
    });
  }

  /**
   * The run, if the caller may act on it with `permission`: in the project it names, else its
   * key's project, else (the open principal) wherever the run is. Another project's run is "not
   * found", never "forbidden", so ids of other projects cannot be probed.
   */
  private async find(
    caller: Principal,
    permission: 'runs.read' | 'runs.create' | 'runs.delete',
    project: string | undefined,
    id: string,
    withSpec = true,
  ): Promise<RunRecord> {
    const run = await this.deps.store.runs.get(id, { spec: withSpec });
    const p = authorize(caller, permission, project ?? caller.project ?? run?.project);
    if (run === undefined || run.project !== p) {
      throw RunErrors.RUN_NOT_FOUND(`no run ${id} in project "${p}"`);
    }
    return run;
  }
}
