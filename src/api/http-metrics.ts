import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../telemetry/index.js';

/** Records every response under its route template (never the raw URL: bounded label values). */
export function instrumentHttp(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.onHttpResponse(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
  });
}
