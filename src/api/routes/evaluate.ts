import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import { EvaluateRequestSchema, type EvaluationService } from '../../evaluators/index.js';
import { parse } from '../validate.js';

export async function evaluateRoutes(
  app: FastifyInstance,
  { evaluation }: { evaluation: EvaluationService },
): Promise<void> {
  app.post('/v1alpha1/evaluate', { config: { idempotency: 'evaluate' } }, async (request) => {
    const body = parse(EvaluateRequestSchema, request.body);
    authorize(request.principal, 'evaluate', body.project);
    const results = await evaluation.evaluate(body);
    return { results };
  });

  app.get('/v1alpha1/evaluators', async (request) => {
    authorize(request.principal, 'evaluate', request.principal.project);
    return { evaluators: evaluation.describeTypes() };
  });
}
