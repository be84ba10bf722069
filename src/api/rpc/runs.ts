import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import type { Principal } from '../../auth/index.js';
import { callerOf, type IdempotencyExecutor, keyed, requestDigest } from './context.js';
import type { RunService as RunServiceDesc } from './gen/touchstone/v1alpha1/runs_pb.js';

/**
 * Deletes a finished run with its outputs and results, or throws (a pending, running or leased
 * run is refused; permission `runs.delete`). The runs area's service provides it.
 */
export type DeleteRun = (
  principal: Principal,
  project: string | undefined,
  id: string,
) => Promise<unknown>;

/** `touchstone.v1alpha1.RunService`: `DeleteRun`, the same call as `DELETE /v1alpha1/runs/{id}`. */
export function runRpc(
  deleteRun: DeleteRun | undefined,
  idempotency: IdempotencyExecutor | undefined,
): ServiceImpl<typeof RunServiceDesc> {
  return {
    async deleteRun(request, ctx) {
      const { principal } = callerOf(ctx);
      if (request.id === '') {
        throw new ConnectError('id is required', Code.InvalidArgument);
      }
      if (deleteRun === undefined) {
        throw new ConnectError('run deletion is not available on this server', Code.Unimplemented);
      }
      const project = request.project === '' ? undefined : request.project;
      await keyed(
        ctx,
        idempotency,
        'runs.delete',
        () => requestDigest('DeleteRun', request.project, request.id),
        async () => {
          await deleteRun(principal, project, request.id);
          return {};
        },
      );
      return {};
    },
  };
}
