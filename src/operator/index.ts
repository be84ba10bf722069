/**
 * @module operator
 * `touchstone operator`: a Kubernetes controller for the TraceSource, OnlineEvalPolicy, EvalRun
 * and Webhook custom resources. It is a client of the server's REST API with its own API key
 * (the server stays the single source of truth): it watches the resources, applies each to the
 * server (`validate_only` first), mirrors the server's status into the resource's status, and
 * deletes the server's resource when a TraceSource, policy or Webhook is deleted (finalizers).
 * One replica leads through a Lease. The decisions are pure functions (reconcile.ts); the rest
 * performs them.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { Controller, type ControllerLog, type ControllerTiming } from './controller.js';
import { Kube, kubeMessage, kubeStatus } from './kube.js';
import { LeaderElector } from './leader.js';
import { TouchstoneClient } from './server-client.js';

export { type RunningAdmission, startAdmission } from './admission.js';
export { FINALIZER, KINDS } from './kinds.js';
export { TouchstoneClient } from './server-client.js';

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  /** Watch only this namespace; empty: all of them. */
  namespace: string;
  server: { url: string; apiKey: string | undefined; timeoutMs: number };
  lease: { namespace: string; name: string; identity: string; durationMs: number };
  timing: ControllerTiming;
  log: ControllerLog;
}

export interface RunningOperator {
  readonly isLeader: boolean;
  /** Stops watching and reconciling; hands the Lease back when leading. */
  stop(): Promise<void>;
}

export const OPERATOR_COMPONENT = 'touchstone-operator';

export function startOperator(options: OperatorOptions): RunningOperator {
  const kube = new Kube(options.kubeConfig, options.namespace, OPERATOR_COMPONENT);
  const server = new TouchstoneClient(
    options.server.url,
    options.server.apiKey,
    options.server.timeoutMs,
  );
  const controller = new Controller(kube, server, options.timing, options.log);
  const elector = new LeaderElector(
    kube,
    { ...options.lease, retryMs: Math.max(100, Math.floor(options.lease.durationMs / 3)) },
    (leading) => {
      options.log.info(leading ? 'leading' : 'not leading', { identity: options.lease.identity });
      controller.setLeading(leading);
    },
    (err) => {
      // 409: another replica wrote the Lease first; it leads.
      if (kubeStatus(err) !== 409) options.log.warn('lease not renewed', { err: kubeMessage(err) });
    },
  );
  controller.start();
  elector.start();
  return {
    get isLeader() {
      return elector.isLeader;
    },
    async stop() {
      await elector.stop();
      await controller.stop();
    },
  };
}
