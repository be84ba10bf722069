import {
  type AuditLogger,
  audited,
  authorize,
  type Principal,
  type ResourceFacts,
} from '../auth/index.js';
import type { Clock, ErrorOptions } from '../core/index.js';
import type { NamedRecord, Page, PageRequest, ResourceRows } from '../store/index.js';
import type { ResourceDescriptor } from './descriptor.js';

/** What every resource service needs: the audit log, the time, and whom to tell of a change. */
export interface ResourceServiceDeps {
  clock: Clock;
  logger: AuditLogger;
  /** Called after an apply or delete stored something, so this replica acts on it at once. */
  onChange?: () => void;
}

/** A resource as its parser gives it: its name and, when the document names one, its project. */
export interface ParsedResource {
  name: string;
  project?: string;
}

export interface ApplyOptions {
  project?: string;
  validateOnly?: boolean;
}

/**
 * The operations every declarative resource has (REST and CLI call them): apply with
 * `validateOnly`, get, list (paged) and delete, each scoped to a project and authorized by the
 * descriptor's permissions; apply and delete are audited with the resource's name. A resource's
 * service extends it with its hooks — parse, check, write, the views — and its own verbs.
 *
 * `P` is the parsed document, `R` the stored record, `V` the view answers show, `A` the apply
 * answer (the view, plus what only apply says: `created`, a secret shown once).
 */
export abstract class ResourceService<P extends ParsedResource, R extends NamedRecord, V, A> {
  /** `rows`: the resource's table. */
  protected constructor(
    readonly resource: ResourceDescriptor,
    private readonly kit: ResourceServiceDeps,
    private readonly rows: ResourceRows<R>,
  ) {}

  /** Validates the document's shape, throwing the resource's own error with every problem. */
  protected abstract parse(input: unknown): P | Promise<P>;

  /**
   * What the shape cannot say (references, URLs, grants), once the caller may write to the
   * project; `input` is the document as given.
   */
  protected abstract check(parsed: P, project: string, input: unknown): Promise<void>;

  /** `validateOnly`'s answer: what apply would store, nothing written. `now` is RFC 3339. */
  protected abstract preview(parsed: P, project: string, existing: R | undefined, now: string): A;

  /** Stores the checked resource (created or replaced by name) and returns apply's answer. */
  protected abstract write(parsed: P, project: string, now: number): Promise<A>;

  /** A record as answers show it. */
  protected abstract view(record: R): V | Promise<V>;

  /** The resource's NOT_FOUND error. */
  protected abstract notFound(project: string, name: string): Error;

  /** How get and list show records: their views, one at a time unless a resource knows better. */
  protected async present(records: readonly R[], _project: string): Promise<V[]> {
    const out: V[] = [];
    for (const record of records) out.push(await this.view(record));
    return out;
  }

  /** Checks everything and, unless `validateOnly`, creates or replaces the resource by name. */
  async apply(caller: Principal, input: unknown, options: ApplyOptions = {}): Promise<A> {
    const parsed = await this.parse(input);
    const requested = parsed.project ?? options.project;
    const check = async () => {
      const project = authorize(
        caller,
        this.resource.access.write,
        requested,
        this.named(parsed.name),
      );
      await this.check(parsed, project, input);
      return project;
    };
    if (options.validateOnly === true) {
      const project = await check();
      const existing = await this.rows.get(project, parsed.name);
      return this.preview(parsed, project, existing, new Date(this.kit.clock.now()).toISOString());
    }
    return this.audited(caller, 'apply', requested, parsed.name, async () => {
      const applied = await this.write(parsed, await check(), this.kit.clock.now());
      this.kit.onChange?.();
      return applied;
    });
  }

  async list(caller: Principal, project: string | undefined, page: PageRequest): Promise<Page<V>> {
    const p = authorize(caller, this.resource.access.read, project);
    const result = await this.rows.list(p, page);
    return { ...result, items: await this.present(result.items, p) };
  }

  async get(caller: Principal, project: string | undefined, name: string): Promise<V> {
    const record = await this.find(caller, 'read', project, name);
    const [view] = await this.present([record], record.project);
    return view as V;
  }

  /** Deletes the resource and answers with it as it was. */
  async delete(caller: Principal, project: string | undefined, name: string): Promise<V> {
    return this.audited(caller, 'delete', project, name, async () => {
      const record = await this.find(caller, 'write', project, name);
      const view = await this.view(record);
      await this.rows.delete(record.project, name);
      this.kit.onChange?.();
      return view;
    });
  }

  /** The named resource of the caller's project, after checking the caller may read or write it. */
  protected async find(
    caller: Principal,
    access: 'read' | 'write',
    project: string | undefined,
    name: string,
  ): Promise<R> {
    const p = authorize(caller, this.resource.access[access], project, this.named(name));
    const record = await this.rows.get(p, name);
    if (record === undefined) throw this.notFound(p, name);
    return record;
  }

  /** The resource a call names, as access rules see it (`resource.webhook.name`). */
  protected named(name: string): ResourceFacts {
    return { [this.resource.singular]: { name } };
  }

  /** Runs a write audited as `<plural>.<verb>` on the named resource. */
  protected audited<T>(
    caller: Principal,
    verb: string,
    project: string | undefined,
    name: string,
    fn: () => Promise<T>,
  ): Promise<T> {
    const { plural, singular } = this.resource;
    return audited(this.kit.logger, caller, `${plural}.${verb}`, project, { [singular]: name }, fn);
  }
}

/**
 * The `since` of a verb that goes back in time (a policy's rescore, a source's backfill): epoch
 * ms, or the resource's invalid-argument error naming `since`.
 */
export function sinceMs(
  since: string,
  invalid: (message: string, options: ErrorOptions) => Error,
): number {
  const ms = Date.parse(since);
  if (!/^\d{4}-\d\d-\d\dT/.test(since) || Number.isNaN(ms)) {
    throw invalid('`since` is not an RFC 3339 time', {
      details: [{ path: 'since', message: 'an RFC 3339 time such as 2026-01-02T15:04:05Z' }],
    });
  }
  return ms;
}

/** The kit's four operations of any resource service: what the REST routes and CLI verbs call. */
export type ResourceOperations = Pick<
  ResourceService<ParsedResource, NamedRecord, unknown, unknown>,
  'resource' | 'apply' | 'list' | 'get' | 'delete'
>;
