import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseDuration } from '../../config/index.js';
import { type TraceQueries, traceSummaryView } from '../../ingest/index.js';
import type { AnnotationService, PolicyService, ScoreQueries } from '../../policies/index.js';
import { one, type Query } from '../context.js';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, parseQuery } from '../validate.js';
import { parseLabelFilters } from './traces.js';

export const ScoreListQuerySchema = z.strictObject({
  project: z.string().min(1).optional(),
  service: z.string().min(1).optional(),
  policy: z.string().min(1).optional(),
  evaluator: z.string().min(1).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  page_size: z.coerce.number().int().min(1).max(PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
  page_token: z.string().optional(),
});

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

const bucket = z
  .string()
  .transform((text, ctx) => {
    const ms = parseDuration(text);
    if (ms === undefined || ms < MINUTE || ms > 7 * DAY) {
      ctx.addIssue({ code: 'custom', message: 'a duration from 1m to 168h, such as 5m or 1h' });
      return z.NEVER;
    }
    return ms;
  })
  .default(60 * MINUTE);

export const ScoreAggregateQuerySchema = z.strictObject({
  project: z.string().min(1).optional(),
  policy: z.string().min(1).optional(),
  evaluator: z.string().min(1).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  bucket,
});

/**
 * `GET /v1alpha1/scores` (bulk, newest scored first), `GET /v1alpha1/scores:aggregate` (each
 * policy metric over time), `GET /v1alpha1/traces/{id}/scores` and the one write beside them,
 * `POST /v1alpha1/traces/{id}/annotations` (a person's score).
 */
export async function scoreRoutes(
  app: FastifyInstance,
  {
    scores,
    traces,
    policies,
    annotations,
  }: {
    scores: ScoreQueries;
    traces: TraceQueries;
    policies: PolicyService;
    annotations: AnnotationService;
  },
): Promise<void> {
  // `::` is a literal colon (find-my-way's escape).
  app.get('/v1alpha1/scores::aggregate', async (request) => {
    const query = request.query as Query;
    const q = parseQuery(ScoreAggregateQuerySchema, query, ['labels']);
    return policies.series(request.principal, {
      ...(q.project === undefined ? {} : { project: q.project }),
      ...(q.policy === undefined ? {} : { policy: q.policy }),
      ...(q.evaluator === undefined ? {} : { evaluator: q.evaluator }),
      labels: parseLabelFilters(query.labels),
      ...(q.since === undefined ? {} : { since: Date.parse(q.since) }),
      ...(q.until === undefined ? {} : { until: Date.parse(q.until) }),
      bucketMs: q.bucket,
    });
  });

  app.get('/v1alpha1/scores', async (request) => {
    const query = request.query as Query;
    const q = parseQuery(ScoreListQuerySchema, query, ['labels']);
    const page = await scores.list(
      request.principal,
      {
        ...(q.project === undefined ? {} : { project: q.project }),
        ...(q.service === undefined ? {} : { service: q.service }),
        ...(q.policy === undefined ? {} : { policy: q.policy }),
        ...(q.evaluator === undefined ? {} : { evaluator: q.evaluator }),
        ...(q.since === undefined ? {} : { since: Date.parse(q.since) }),
        labels: parseLabelFilters(query.labels),
      },
      { pageSize: q.page_size, ...(q.page_token === undefined ? {} : { pageToken: q.page_token }) },
    );
    return {
      entries: page.items,
      ...(page.nextPageToken === undefined ? {} : { next_page_token: page.nextPageToken }),
    };
  });

  app.get('/v1alpha1/traces/:traceId/scores', async (request) => {
    const { traceId } = request.params as { traceId: string };
    // The trace's own visibility rules (grant, 404 for the rest) decide first.
    const found = await traces.get(
      request.principal,
      one(request.query as Query, 'project'),
      traceId,
    );
    const entry = await scores.forTrace(found.trace.project, found.trace.traceId);
    return entry ?? { trace: traceSummaryView(found.trace), results: {} };
  });

  app.post(
    '/v1alpha1/traces/:traceId/annotations',
    { config: { idempotency: 'traces.annotate' } },
    async (request) => {
      const { traceId } = request.params as { traceId: string };
      return annotations.annotate(
        request.principal,
        one(request.query as Query, 'project'),
        traceId,
        request.body,
      );
    },
  );
}
