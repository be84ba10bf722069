import { authorize, coversTrace, grantFilter, type Principal } from '../auth/index.js';
import type { EvalRecord } from '../core/index.js';
import type { Page, PageRequest, Store, StoredTrace, TraceFilter } from '../store/index.js';
import { IngestErrors } from './error-codes.js';

/** Reading traces: permission, project and the key's grant (services, labels) applied. */
export class TraceQueries {
  constructor(private readonly store: Store) {}

  async list(
    principal: Principal,
    filter: Omit<TraceFilter, 'services'>,
    page: PageRequest,
  ): Promise<Page<StoredTrace>> {
    const project = authorize(principal, 'traces.read', filter.project);
    // A filter that contradicts the grant matches nothing the caller may see.
    const grant = grantFilter(principal, filter.labels);
    if (grant === undefined) return { items: [] };
    return this.store.traces.list({ ...filter, project, ...grant }, page);
  }

  /**
   * A trace the caller may see, else TRACE_NOT_FOUND (never "forbidden": existence is not leaked).
   * `id` is a trace id, or the id a trace source's store gives a trace it pulled (MLflow's
   * `tr-<hex>`, a Langfuse or Phoenix id that is not an OpenTelemetry trace id).
   */
  async get(
    principal: Principal,
    project: string | undefined,
    id: string,
  ): Promise<{ trace: StoredTrace; record: EvalRecord }> {
    const target = authorize(principal, 'traces.read', project);
    let found = await this.store.traces.get(target, id.toLowerCase());
    if (found === undefined) {
      const pulled = await this.store.sources.traceIdOf(target, id);
      if (pulled !== undefined) found = await this.store.traces.get(target, pulled);
    }
    if (found === undefined || !coversTrace(principal, found.trace)) {
      throw IngestErrors.TRACE_NOT_FOUND(`no trace ${id} in project "${target}"`);
    }
    return found;
  }
}
