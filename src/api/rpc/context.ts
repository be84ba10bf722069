import { createHash } from 'node:crypto';
import { createContextKey, type HandlerContext } from '@connectrpc/connect';
import type { FastifyBaseLogger } from 'fastify';
import { type Principal, principalId } from '../../auth/index.js';
import { IDEMPOTENCY_HEADER, parseIdempotencyKey, REPLAYED_HEADER } from '../idempotency/index.js';
import { connectErrorFromBody } from './errors.js';

/** The request facts an RPC handler needs, handed over from Fastify by `contextValues`. */
export interface RpcCaller {
  principal: Principal;
  requestId: string;
  log: FastifyBaseLogger;
  /** Called with the error a handler failed with (the audit trail records refusals). */
  onError?: (err: unknown) => void;
}

export const CALLER = createContextKey<RpcCaller | undefined>(undefined, {
  description: 'the authenticated caller of an RPC',
});

export function callerOf(ctx: HandlerContext): RpcCaller {
  const caller = ctx.values.get(CALLER);
  // The auth hook runs before every route, so a handler without a caller is a wiring error.
  if (caller === undefined) throw new Error('RPC handler reached without an authenticated caller');
  return caller;
}

/** An outcome as the idempotency store keeps it: the HTTP status and JSON body REST would send. */
export interface StoredOutcome {
  status: number;
  body: unknown;
}

/**
 * The idempotency service's surface the RPC handlers use (api/idempotency): runs `fn` once per
 * principal, operation and key, replays its stored outcome for 24 hours (a stored refusal is
 * thrown again), and refuses the same key with another payload digest or while the first call
 * is still running.
 */
export interface IdempotencyExecutor {
  execute(
    scope: { principal: string; operation: string; key: string },
    requestDigest: string,
    fn: () => Promise<StoredOutcome>,
  ): Promise<StoredOutcome & { replayed?: boolean }>;
}

/** SHA-256 over the parts of a request, each length-prefixed so parts cannot run together. */
export function requestDigest(...parts: (string | Uint8Array)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'utf8') : part;
    hash.update(`${bytes.length}:`);
    hash.update(bytes);
  }
  return hash.digest('hex');
}

/**
 * Runs a retryable write under the request's `Idempotency-Key` when it has one (and the server
 * has the idempotency service): the first call's outcome, success or stored refusal, is what
 * every retry with the key gets, in the same scope (principal, operation, key) as REST uses.
 * `run` returns the JSON body REST would answer with.
 */
export async function keyed<T>(
  ctx: HandlerContext,
  idempotency: IdempotencyExecutor | undefined,
  operation: string,
  digest: () => string,
  run: () => Promise<T>,
): Promise<T> {
  const key = parseIdempotencyKey(ctx.requestHeader.get(IDEMPOTENCY_HEADER) ?? undefined);
  if (key === undefined || idempotency === undefined) return run();
  const caller = callerOf(ctx);
  const outcome = await idempotency.execute(
    { principal: principalId(caller.principal), operation, key },
    digest(),
    async () => ({ status: 200, body: await run() }),
  );
  if (outcome.replayed === true) ctx.responseHeader.set(REPLAYED_HEADER, 'true');
  if (outcome.status >= 200 && outcome.status < 300) return outcome.body as T;
  throw connectErrorFromBody(outcome.status, outcome.body, caller.requestId);
}
