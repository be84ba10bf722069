import { authorize, grantFilter, type Principal, readFacts } from '../auth/index.js';
import type { Result } from '../core/index.js';
import { traceSummaryView } from '../ingest/index.js';
import type { Page, PageRequest, ScoredTrace, ScoreFilter, Store } from '../store/index.js';

/** One scores entry: the trace summary and its latest results, grouped by policy name. */
export interface ScoresEntry {
  trace: ReturnType<typeof traceSummaryView>;
  /** When any policy last stored results for the trace. */
  scoredAt: string;
  results: Record<string, Result[]>;
}

export function scoresEntry(scored: ScoredTrace): ScoresEntry {
  return {
    trace: traceSummaryView(scored.trace),
    scoredAt: scored.scoredAt,
    results: Object.fromEntries(scored.policies.map((p) => [p.policy, p.results])),
  };
}

/** Reading online scores in bulk: permission, project and the key's grant applied. */
export class ScoreQueries {
  constructor(private readonly store: Store) {}

  async list(
    principal: Principal,
    filter: Omit<ScoreFilter, 'services'>,
    page: PageRequest,
  ): Promise<Page<ScoresEntry>> {
    const project = authorize(principal, 'traces.read', filter.project, readFacts(filter));
    const grant = grantFilter(principal, filter.labels);
    if (grant === undefined) return { items: [] };
    const result = await this.store.results.list({ ...filter, project, ...grant }, page);
    return { ...result, items: result.items.map(scoresEntry) };
  }

  /** The caller must already see the trace (TraceQueries.get); undefined = not scored yet. */
  async forTrace(project: string, traceId: string): Promise<ScoresEntry | undefined> {
    const scored = await this.store.results.forTrace(project, traceId);
    return scored === undefined ? undefined : scoresEntry(scored);
  }
}
