import { createHash } from 'node:crypto';
import { type Principal, principalId } from '../auth/index.js';

/** The idempotency service's surface `create_run` uses (api/idempotency's `execute`). */
export interface IdempotentCall {
  execute(
    scope: { principal: string; operation: string; key: string },
    requestDigest: string,
    fn: () => Promise<{ status: number; body: unknown }>,
  ): Promise<{ status: number; body: unknown }>;
}

/**
 * Runs `fn` once per caller and key: a retry with the same key and arguments answers with the
 * first outcome (a stored refusal is thrown again), for 24 hours. The scope is that of REST's
 * `Idempotency-Key` on `POST /v1alpha1/runs` (caller, `runs.create`), so a key already used there
 * for another request is refused as reused rather than creating a second run.
 */
export async function runKeyed<T>(
  idempotency: IdempotentCall,
  principal: Principal,
  key: string,
  args: unknown,
  fn: () => Promise<T>,
): Promise<T> {
  const digest = createHash('sha256')
    .update(`mcp:create_run:${JSON.stringify(args)}`)
    .digest('hex');
  const outcome = await idempotency.execute(
    { principal: principalId(principal), operation: 'runs.create', key },
    digest,
    async () => ({ status: 200, body: await fn() }),
  );
  return outcome.body as T;
}
