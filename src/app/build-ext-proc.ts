import {
  AuthErrors,
  type BearerAuthenticator,
  OPEN_PRINCIPAL,
  type Principal,
} from '../auth/index.js';
import { type Config, isLoopbackListen, splitListen } from '../config/index.js';
import { createExtProcServer, type ExtProcServer, type Guard } from '../guardrails/index.js';
import { authRequired } from './build-server.js';

/**
 * The Envoy external processor when `guardrails.ext_proc.listen` is set. Gateways authenticate
 * as REST callers do (a bearer API key or identity token, here in the stream's `authorization`
 * metadata), whenever the server requires auth or the processor listens off loopback.
 */
export async function buildExtProc(
  config: Readonly<Config>,
  deps: { guard: Guard; bearer: Pick<BearerAuthenticator, 'authenticate'> },
): Promise<ExtProcServer | undefined> {
  const ext = config.guardrails.ext_proc;
  if (ext.listen === undefined) return undefined;
  const required = !config.no_auth && (authRequired(config) || !isLoopbackListen(ext.listen));
  const { host, port } = splitListen(ext.listen);
  return createExtProcServer({
    host,
    port,
    maxStreams: ext.max_streams,
    shutdownTimeoutMs: config.shutdown_timeout,
    guard: deps.guard,
    settings: {
      ...(ext.policy === undefined ? {} : { policy: ext.policy }),
      failOpen: ext.fail_open,
      maxBodyBytes: ext.max_body_bytes,
      maxBatch: ext.max_batch,
      bodyTimeoutMs: ext.body_timeout,
      decisionTimeoutMs: ext.decision_timeout,
    },
    authenticate: (authorization) =>
      required ? bearerOf(authorization, deps.bearer) : Promise.resolve(OPEN_PRINCIPAL),
  });
}

async function bearerOf(
  authorization: string | undefined,
  bearer: Pick<BearerAuthenticator, 'authenticate'>,
): Promise<Principal> {
  if (authorization === undefined || authorization === '') {
    throw AuthErrors.UNAUTHENTICATED(
      'missing credentials: send "authorization: Bearer <API key>" metadata',
    );
  }
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (match === null) {
    throw AuthErrors.UNAUTHENTICATED(
      'malformed authorization metadata: expected "Bearer <API key>"',
    );
  }
  return bearer.authenticate(match[1] as string);
}
