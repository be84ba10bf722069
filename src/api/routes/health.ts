import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import type { Metrics } from '../../telemetry/index.js';

export interface HealthDeps {
  /** Throws when the database is unreachable or not migrated. */
  ready(): Promise<void>;
  metrics: Metrics;
}

export async function healthRoutes(app: FastifyInstance, deps: HealthDeps): Promise<void> {
  // `service` lets the CLI tell a Touchstone server from whatever else answers on the port.
  app.get('/healthz', async () => ({ status: 'ok', service: 'touchstone' }));

  app.get('/readyz', async (request, reply) => {
    try {
      await deps.ready();
      return { status: 'ready' };
    } catch (err) {
      request.log.warn({ err }, 'not ready');
      return reply
        .code(503)
        .send({ status: 'unavailable', reason: 'database not reachable or not migrated' });
    }
  });

  // Series carry every project's names: admins and owners read them (the open principal on
  // loopback without auth is an owner, so a local scrape needs nothing).
  app.get('/metrics', async (request, reply) => {
    authorize(request.principal, 'metrics.read');
    const text = await deps.metrics.registry.metrics();
    return reply.type(deps.metrics.registry.contentType).send(text);
  });
}
