import {
  authorize,
  coversTrace,
  DEFAULT_PROJECT,
  grantFilter,
  type Principal,
  readFacts,
} from '../auth/index.js';
import { CoreErrors, type EvalRecord, type Step, type TraceRoot } from '../core/index.js';
import type {
  Page,
  PageRequest,
  ScoredTrace,
  Store,
  StoredTrace,
  TraceFilter,
} from '../store/index.js';
import { IngestErrors } from './error-codes.js';

/** A page of a trace's trajectory, and how many steps it has in all. */
export interface TrajectoryPage extends Page<Step> {
  total: number;
}

/** Reading traces: permission, project and the key's grant (services, labels) applied. */
export class TraceQueries {
  constructor(private readonly store: Store) {}

  async list(
    principal: Principal,
    filter: Omit<TraceFilter, 'services'>,
    page: PageRequest,
  ): Promise<Page<StoredTrace>> {
    const project = authorize(principal, 'traces.read', filter.project, readFacts(filter));
    // A filter that contradicts the grant matches nothing the caller may see.
    const grant = grantFilter(principal, filter.labels);
    if (grant === undefined) return { items: [] };
    return this.store.traces.list({ ...filter, project, ...grant }, page);
  }

  /** The latest results per policy of traces the caller has listed, in their order. */
  latestResults(traces: readonly StoredTrace[]): Promise<ScoredTrace['policies'][]> {
    return this.store.results.latestOf(traces);
  }

  /**
   * A trace the caller may see, else TRACE_NOT_FOUND (never "forbidden": existence is not leaked).
   * `id` is a trace id, or the id a trace source's store gives a trace it pulled (MLflow's
   * `tr-<hex>`, a Langfuse or Phoenix id that is not an OpenTelemetry trace id). Once the trace
   * is known, the access rules are checked again for `action` with its service and labels.
   */
  async get(
    principal: Principal,
    project: string | undefined,
    id: string,
    action: 'traces.read' | 'traces.annotate' = 'traces.read',
  ): Promise<{ trace: StoredTrace; record: EvalRecord; root?: TraceRoot }> {
    return this.find(principal, project, id, action, (target, traceId) =>
      this.store.traces.get(target, traceId),
    );
  }

  /** As `get`, the record as stored (JSON text): the whole record to send on unchanged. */
  getRecordJson(
    principal: Principal,
    project: string | undefined,
    id: string,
  ): Promise<{ trace: StoredTrace; recordJson: string }> {
    return this.find(principal, project, id, 'traces.read', (target, traceId) =>
      this.store.traces.getRecordJson(target, traceId),
    );
  }

  private async find<T extends { trace: StoredTrace }>(
    principal: Principal,
    project: string | undefined,
    id: string,
    action: 'traces.read' | 'traces.annotate',
    load: (project: string, traceId: string) => Promise<T | undefined>,
  ): Promise<T> {
    const target = authorize(principal, 'traces.read', project);
    let found = await load(target, id.toLowerCase());
    if (found === undefined) {
      const pulled = await this.store.sources.traceIdOf(target, id);
      if (pulled !== undefined) found = await load(target, pulled);
    }
    if (found === undefined || !coversTrace(principal, found.trace)) {
      throw IngestErrors.TRACE_NOT_FOUND(`no trace ${id} in project "${target}"`);
    }
    const { service, labels } = found.trace;
    principal.rules?.check(principal, action, target, { service, labels });
    return found;
  }

  /**
   * One page of a trace's trajectory, in the record's step order: a trace of many thousand
   * steps is read in pages instead of one answer a browser would have to parse at once. The
   * token remembers the trace version; a trace completed again meanwhile answers TRACE_CHANGED.
   */
  async trajectory(
    principal: Principal,
    project: string | undefined,
    traceId: string,
    page: PageRequest,
  ): Promise<TrajectoryPage> {
    const { trace, record } = await this.get(principal, project, traceId);
    const steps = record.trajectory ?? [];
    const from = page.pageToken === undefined ? 0 : decodeStepToken(page.pageToken, trace.digest);
    const to = Math.min(steps.length, from + page.pageSize);
    return {
      items: steps.slice(from, to),
      total: steps.length,
      ...(to < steps.length ? { nextPageToken: encodeStepToken(to, trace.digest) } : {}),
    };
  }

  /** The projects the caller may read traces of: its key's, or (open) every project with traces. */
  async projects(principal: Principal): Promise<string[]> {
    if (principal.project !== undefined) return [principal.project];
    const stored = await this.store.traces.projects();
    return stored.includes(DEFAULT_PROJECT) ? stored : [DEFAULT_PROJECT, ...stored].sort();
  }
}

/** The digest's first characters are enough to tell a changed trace. */
const DIGEST_PREFIX = 16;

function encodeStepToken(offset: number, digest: string): string {
  return Buffer.from(JSON.stringify([offset, digest.slice(0, DIGEST_PREFIX)])).toString(
    'base64url',
  );
}

function decodeStepToken(token: string, digest: string): number {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    !Number.isSafeInteger(parsed[0]) ||
    (parsed[0] as number) < 0 ||
    typeof parsed[1] !== 'string'
  ) {
    throw CoreErrors.INVALID_ARGUMENT('page_token is not a token this server issued', {
      details: [{ path: 'page_token', message: 'malformed page token' }],
    });
  }
  if (parsed[1] !== digest.slice(0, DIGEST_PREFIX)) {
    throw IngestErrors.TRACE_CHANGED(
      'the trace changed since the first page of its trajectory was read; read it again from the first page',
    );
  }
  return parsed[0] as number;
}
