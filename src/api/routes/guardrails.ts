import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import {
  type GuardEngine,
  type GuardPhase,
  type GuardPolicyService,
  promptGuardAnswer,
  promptGuardSubject,
  rejectAnswer,
} from '../../guardrails/index.js';
import { one, type Query } from '../context.js';
import { resourceRoutes } from '../resource-routes.js';

/**
 * The largest webhook body: room for MAX_SUBJECT_CHARS characters of text however escaped. A
 * larger one is refused with 413 before it is read whole (the gateway treats it as a failed
 * call: failClosed gives its client a 503).
 */
export const MAX_GUARD_BODY_BYTES = 1024 * 1024;

/**
 * `/v1alpha1/guardpolicies` (the resource routes) and the agentgateway prompt-guard webhook,
 * `POST /v1alpha1/guardrails/{policy}/request` and `/response` (docs/guardrails.md). The webhook
 * answers 200 with an `action` the gateway parses for everything the guard decides, a body that
 * is not the gateway's shape included (a reject with status 400). Refusals of the credential are
 * the API's own 401 and 403: the gateway's `failureMode` covers them.
 */
export async function guardrailRoutes(
  app: FastifyInstance,
  { guardPolicies, engine }: { guardPolicies: GuardPolicyService; engine: GuardEngine },
): Promise<void> {
  resourceRoutes(app, guardPolicies);

  for (const phase of ['request', 'response'] as const satisfies GuardPhase[]) {
    app.post(
      `/v1alpha1/guardrails/:policy/${phase}`,
      { bodyLimit: MAX_GUARD_BODY_BYTES },
      async (request) => {
        const { policy } = request.params as { policy: string };
        const project = one(request.query as Query, 'project');
        authorize(request.principal, 'evaluate', project, { policy: { name: policy } });
        const subject = promptGuardSubject(phase, request.body, request.headers);
        if ('invalid' in subject) {
          return rejectAnswer(
            400,
            `guardrail refused the call: ${subject.invalid}`,
            'invalid-request',
          );
        }
        const decision = await engine.decide(policy, subject, request.principal, project);
        return promptGuardAnswer(phase, decision);
      },
    );
  }
}
