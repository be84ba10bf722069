import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type TraceQueries, traceSummaryView } from '../../ingest/index.js';
import { one, type Query } from '../context.js';
import { ApiErrors } from '../error-codes.js';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, parseQuery } from '../validate.js';

const ListQuerySchema = z.strictObject({
  project: z.string().min(1).optional(),
  service: z.string().min(1).optional(),
  name: z.string().min(1).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  error: z.enum(['true', 'false']).optional(),
  source: z.string().optional(),
  page_size: z.coerce.number().int().min(1).max(PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
  page_token: z.string().optional(),
});

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
    const q = parseQuery(ListQuerySchema, query, ['labels']);
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
        labels: parseLabelFilters(query.labels),
      },
      { pageSize: q.page_size, ...(q.page_token === undefined ? {} : { pageToken: q.page_token }) },
    );
    return {
      traces: page.items.map(traceSummaryView),
      ...(page.nextPageToken === undefined ? {} : { next_page_token: page.nextPageToken }),
    };
  });

  app.get('/v1alpha1/traces/:traceId', async (request) => {
    const { traceId } = request.params as { traceId: string };
    const found = await traces.get(
      request.principal,
      one(request.query as Query, 'project'),
      traceId,
    );
    return { trace: traceSummaryView(found.trace), record: found.record };
  });
}
