import type { Principal } from '../auth/index.js';
import { compileExpression, traceFacts } from '../cel/index.js';
import type { Outcome } from '../core/index.js';
import { type TraceQueries, traceSummaryView } from '../ingest/index.js';
import type { StoredTrace } from '../store/index.js';

/** Traces a CEL `filter` may read (each one's record) in one call, matched or not. */
export const MAX_FILTER_SCAN = 200;

export interface SearchArgs {
  project?: string | undefined;
  service?: string | undefined;
  name?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
  error?: boolean | undefined;
  source?: string | undefined;
  policy?: string | undefined;
  evaluator?: string | undefined;
  outcome?: Outcome | undefined;
  labels?: Record<string, string> | undefined;
  filter?: string | undefined;
  include_scores: boolean;
  page_size: number;
  page_token?: string | undefined;
}

function defined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * `search_traces`: the trace list of `GET /v1alpha1/traces` and, with a CEL `filter`, only the
 * traces it selects. The filter reads each candidate's record (through the same visibility
 * checks as `get_trace`), so one call reads at most MAX_FILTER_SCAN candidates, a page of
 * `page_size` at a time; it stops once a page is full, and its token continues after the last
 * candidate read, matched or not. `scanned` says how many were read.
 */
export async function searchTraces(principal: Principal, traces: TraceQueries, args: SearchArgs) {
  const filter = {
    ...defined({
      project: args.project,
      service: args.service,
      name: args.name,
      since: args.since,
      until: args.until,
      error: args.error,
      source: args.source,
      policy: args.policy,
      evaluator: args.evaluator,
      outcome: args.outcome,
    }),
    labels: args.labels ?? {},
  };
  const selector =
    args.filter === undefined ? undefined : compileExpression(args.filter, 'selector', 'filter');
  const found: StoredTrace[] = [];
  let token = args.page_token;
  let scanned = 0;
  do {
    const page = await traces.list(principal, filter, {
      pageSize: args.page_size,
      ...(token === undefined ? {} : { pageToken: token }),
    });
    token = page.nextPageToken;
    scanned += page.items.length;
    for (const t of page.items) {
      if (selector === undefined) {
        found.push(t);
        continue;
      }
      const { trace, record, root } = await traces.get(principal, t.project, t.traceId);
      const r = selector.evaluate(traceFacts(trace, record, root));
      // A trace the filter cannot be evaluated on (a missing key) is not selected, as in policies.
      if (r.ok && r.value) found.push(t);
    }
  } while (
    selector !== undefined &&
    token !== undefined &&
    found.length < args.page_size &&
    scanned < MAX_FILTER_SCAN
  );
  const scores = args.include_scores ? await traces.latestResults(found) : undefined;
  return {
    traces: found.map((t, i) => ({
      ...traceSummaryView(t),
      ...(scores === undefined
        ? {}
        : { scores: Object.fromEntries((scores[i] ?? []).map((p) => [p.policy, p.results])) }),
    })),
    ...(selector === undefined ? {} : { scanned }),
    ...(token === undefined ? {} : { next_page_token: token }),
  };
}
