import type { FastifyInstance } from 'fastify';
import { OPENAPI_PATH, openApiDocument } from '../openapi.js';

/**
 * `GET /v1alpha1/openapi.json`: the OpenAPI 3.1 document of the REST API. Public like the web
 * UI's files: it describes the API and holds no data (docs/openapi.json is the same document).
 */
export async function openApiRoutes(app: FastifyInstance): Promise<void> {
  // Built on first request (≈30 ms), not at every start.
  let body: string | undefined;
  app.get(OPENAPI_PATH, async (_request, reply) => {
    body ??= JSON.stringify(openApiDocument());
    return reply.type('application/json').send(body);
  });
}
