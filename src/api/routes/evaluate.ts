import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
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
    return {
      evaluators: evaluation.evaluatorTypes().map(({ manifest }) => ({
        type: manifest.type,
        description: manifest.description,
        needs: manifest.needs,
        scores: manifest.scores,
        cheap: manifest.cheap,
        params: z.toJSONSchema(manifest.params, { io: 'input', unrepresentable: 'any' }),
      })),
    };
  });
}
