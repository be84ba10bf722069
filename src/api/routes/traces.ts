import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { OUTCOMES } from '../../core/index.js';
import { type TraceQueries, traceSummaryView } from '../../ingest/index.js';
import type { StoredTrace } from '../../store/index.js';
import { one, type Query } from '../context.js';
import { ApiErrors } from '../error-codes.js';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, pageOf, parse, parseQuery } from '../validate.js';

export const TraceListQuerySchema = z.strictObject({
  project: z.string().min(1).optional(),
  service: z.string().min(1).optional(),
  name: z.string().min(1).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  error: z.enum(['true', 'false']).optional(),
  source: z.string().optional(),
  policy: z.string().min(1).optional(),
  evaluator: z.string().min(1).optional(),
  outcome: z.enum(OUTCOMES).optional(),
  include: z.enum(['scores']).optional(),
  page_size: z.coerce.number().int().min(1).max(PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
  page_token: z.string().optional(),
});

export const TraceViewSchema = z.enum(['basic', 'full']).default('full');

/** The list's summary: the shared one, plus token usage (absent when the record has none). */
function listedTrace(t: StoredTrace) {
  return { ...traceSummaryView(t), ...(t.usage === undefined ? {} : { usage: t.usage }) };
}

/** `labels=key=value` (repeatable) → a map; each must have a key and an `=`. */
export function parseLabelFilters(values: string | string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [i, pair] of (Array.isArray(values)
    ? values
    : values === undefined
      ? []
      : [values]
  ).entries()) {
    const eq = pair.indexOf('=');
    if (eq <= 0) {
      throw ApiErrors.BODY_INVALID('labels filters are written key=value', {
        details: [{ path: `labels[${i}]`, message: 'expected key=value' }],
      });
    }
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

export async function traceRoutes(
  app: FastifyInstance,
  { traces }: { traces: TraceQueries },
): Promise<void> {
  app.get('/v1alpha1/traces', async (request) => {
    const query = request.query as Query;
    const q = parseQuery(TraceListQuerySchema, query, ['labels']);
    const page = await traces.list(
      request.principal,
      {
        ...(q.project === undefined ? {} : { project: q.project }),
        ...(q.service === undefined ? {} : { service: q.service }),
        ...(q.name === undefined ? {} : { name: q.name }),
        ...(q.since === undefined ? {} : { since: q.since }),
        ...(q.until === undefined ? {} : { until: q.until }),
        ...(q.error === undefined ? {} : { error: q.error === 'true' }),
        ...(q.source === undefined ? {} : { source: q.source }),
        ...(q.policy === undefined ? {} : { policy: q.policy }),
        ...(q.evaluator === undefined ? {} : { evaluator: q.evaluator }),
        ...(q.outcome === undefined ? {} : { outcome: q.outcome }),
        labels: parseLabelFilters(query.labels),
      },
      { pageSize: q.page_size, ...(q.page_token === undefined ? {} : { pageToken: q.page_token }) },
    );
    // `include=scores`: each trace's latest results per policy, read in one query for the page.
    const scores = q.include === 'scores' ? await traces.latestResults(page.items) : undefined;
    return {
      traces: page.items.map((t, i) => ({
        ...listedTrace(t),
        ...(scores === undefined
          ? {}
          : { scores: Object.fromEntries((scores[i] ?? []).map((p) => [p.policy, p.results])) }),
      })),
      ...(page.nextPageToken === undefined ? {} : { next_page_token: page.nextPageToken }),
    };
  });

  // `view=basic` leaves out the trajectory (read it in pages from `/trajectory`) and says how
  // many steps it has; `full`, the default, is the whole record.
  app.get('/v1alpha1/traces/:traceId', async (request, reply) => {
    const { traceId } = request.params as { traceId: string };
    const query = request.query as Query;
    const view = parse(TraceViewSchema, one(query, 'view'), 'view');
    const project = one(query, 'project');
    if (view === 'full') {
      // The stored record as it is: parsing and writing out again a trace of 2,000 steps
      // (670 KiB) was most of the answer's server time.
      const { trace, recordJson } = await traces.getRecordJson(request.principal, project, traceId);
      return reply
        .type('application/json; charset=utf-8')
        .send(`{"trace":${JSON.stringify(listedTrace(trace))},"record":${recordJson}}`);
    }
    const found = await traces.get(request.principal, project, traceId);
    const { trajectory, ...record } = found.record;
    return {
      trace: listedTrace(found.trace),
      record,
      trajectorySteps: trajectory?.length ?? 0,
    };
  });

  app.get('/v1alpha1/traces/:traceId/trajectory', async (request) => {
    const { traceId } = request.params as { traceId: string };
    const { project, page } = pageOf(request.query as Query);
    const result = await traces.trajectory(request.principal, project, traceId, page);
    return {
      steps: result.items,
      total: result.total,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });
}
