import { createContextValues, type Interceptor } from '@connectrpc/connect';
import { fastifyConnectPlugin } from '@connectrpc/connect-fastify';
import type { FastifyInstance } from 'fastify';
import type { DatasetService } from '../../datasets/index.js';
import { noteFailure } from '../audit-hook.js';
import { CALLER, type IdempotencyExecutor } from './context.js';
import { datasetRpc } from './datasets.js';
import { sendRpcError, toConnectError } from './errors.js';
import { DatasetService as DatasetServiceDesc } from './gen/touchstone/v1alpha1/datasets_pb.js';
import { RunService as RunServiceDesc } from './gen/touchstone/v1alpha1/runs_pb.js';
import { type DeleteRun, runRpc } from './runs.js';

export interface RpcDeps {
  datasets: DatasetService;
  /** The runs area's delete; without it DeleteRun answers UNIMPLEMENTED. */
  deleteRun?: DeleteRun;
  /** The idempotency service; without it `Idempotency-Key` is not honoured on RPC. */
  idempotency?: IdempotencyExecutor;
  /** Largest single message: a dataset upload fits in one (64 MiB) plus framing. */
  readMaxBytes: number;
}

/** Handler errors as Connect errors with the request id and stable error code (errors.ts). */
const touchstoneErrors: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    const caller = req.contextValues.get(CALLER);
    if (caller === undefined) throw err;
    caller.onError?.(err);
    throw toConnectError(err, caller.requestId, caller.log);
  }
};

/**
 * The Connect RPC services on the main port: Connect, gRPC and gRPC-Web from one handler
 * (@connectrpc/connect-fastify), under `/touchstone.v1alpha1.<Service>/<Method>`. The routes
 * sit behind the same auth hook as REST; a refusal there is answered in the caller's protocol.
 */
export async function rpcRoutes(app: FastifyInstance, deps: RpcDeps): Promise<void> {
  app.setErrorHandler((err, request, reply) => sendRpcError(request, reply, err));
  // Connect's handlers read the request stream themselves: nothing else may consume it.
  app.addHook('onRoute', (route) => {
    route.config = { ...route.config, readsRawBody: true };
  });
  await app.register(fastifyConnectPlugin, {
    readMaxBytes: deps.readMaxBytes,
    interceptors: [touchstoneErrors],
    contextValues: (request) =>
      createContextValues().set(CALLER, {
        principal: request.principal,
        requestId: String(request.id),
        log: request.log,
        onError: (err) => noteFailure(request, err),
      }),
    routes: (router) => {
      router.service(DatasetServiceDesc, datasetRpc(deps.datasets, deps.idempotency));
      router.service(RunServiceDesc, runRpc(deps.deleteRun, deps.idempotency));
    },
  });
}
