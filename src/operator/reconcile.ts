import { SourceErrors } from '../sources/index.js';
import {
  type CustomResource,
  FINAL_RUN_PHASES,
  FINALIZER,
  type Json,
  type Kind,
  type SecretRef,
} from './kinds.js';

/**
 * The operator's decisions, as pure functions of a custom resource and what was observed of the
 * server (its answers, a Secret's presence): what to do next, the status to write, the event to
 * record, and when to look again. controller.ts performs them; nothing here does I/O.
 */

/** metav1.Condition; the operator keeps one, `Ready`. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** A failed call to the server: not reached at all, or answered with an error. */
export type ServerFailure =
  | { type: 'unreachable'; message: string }
  | { type: 'refused'; status: number; code?: string; message: string };

export interface KubeEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/** What a reconcile ends with. */
export interface Outcome {
  /** The whole status to write. */
  status: Json;
  event?: KubeEvent;
  /**
   * `backoff`: failed in a way that may pass (server down, a Secret or policy to come): retry
   * with the object's growing backoff. `poll`: synced, with server-side status that moves
   * (a source's counts, a running run): look again after the status interval. `resync`: nothing
   * to do until the object changes or the periodic resync.
   */
  next: 'backoff' | 'poll' | 'resync';
}

/** What to do with a custom resource now. */
export type Step =
  /** Being deleted, the finalizer still on: delete the server's resource, then the finalizer. */
  | 'finalize'
  /** Being deleted, nothing of ours left on it. */
  | 'ignore'
  /** Put the finalizer on before anything reaches the server. */
  | 'add-finalizer'
  /** Validate (`validate_only`), then apply or create. */
  | 'apply'
  /** Already applied at this generation: read the server's status. */
  | 'refresh'
  /** An EvalRun whose spec changed after its run was created. */
  | 'immutable';

export function readyOf(cr: CustomResource): Condition | undefined {
  const conditions = (cr.status?.conditions ?? []) as Condition[];
  return conditions.find((c) => c.type === 'Ready');
}

export function nextStep(kind: Kind, cr: CustomResource): Step {
  const finalizers = cr.metadata.finalizers ?? [];
  if (cr.metadata.deletionTimestamp !== undefined) {
    return finalizers.includes(FINALIZER) ? 'finalize' : 'ignore';
  }
  if (kind.finalizer && !finalizers.includes(FINALIZER)) return 'add-finalizer';
  if (kind.kind === 'EvalRun') {
    if (cr.status?.runId === undefined) return 'apply';
    return cr.status.observedGeneration === cr.metadata.generation ? 'refresh' : 'immutable';
  }
  // A Webhook is applied at every look: its Secret may have been rotated, which changes no
  // generation.
  if (kind.kind === 'Webhook') return 'apply';
  const applied =
    cr.status?.observedGeneration === cr.metadata.generation && readyOf(cr)?.status === 'True';
  return applied ? 'refresh' : 'apply';
}

/** The Ready condition; its transition time moves only when its status does. */
function ready(
  cr: CustomResource,
  status: Condition['status'],
  reason: string,
  message: string,
  now: string,
): Condition {
  const previous = readyOf(cr);
  return {
    type: 'Ready',
    status,
    reason,
    message,
    lastTransitionTime:
      previous !== undefined && previous.status === status ? previous.lastTransitionTime : now,
    ...(cr.metadata.generation === undefined ? {} : { observedGeneration: cr.metadata.generation }),
  };
}

/** Warn once per change of state, not at every retry of the same failure. */
function warnOnChange(cr: CustomResource, reason: string, message: string): KubeEvent | undefined {
  const previous = readyOf(cr);
  if (previous?.reason === reason && previous.message === message) return undefined;
  return { type: 'Warning', reason, message };
}

/** The server has the resource: its view mirrored, Ready. */
export function synced(kind: Kind, cr: CustomResource, view: Json, now: string): Outcome {
  const mirrored = kind.mirror(view);
  const condition = ready(cr, 'True', 'Synced', `applied to the server as ${kind.apiKind}`, now);
  const wasReady = readyOf(cr)?.status === 'True';
  const settled = kind.kind === 'Webhook' || FINAL_RUN_PHASES.has(String(mirrored.phase));
  return {
    status: {
      ...mirrored,
      observedGeneration: cr.metadata.generation,
      conditions: [condition],
    },
    ...(wasReady
      ? {}
      : { event: { type: 'Normal', reason: 'Synced', message: condition.message } }),
    next: settled ? 'resync' : 'poll',
  };
}

/** Why a call failed, as a condition reason; and whether retrying may help. */
export function classify(failure: ServerFailure): { reason: string; retry: boolean } {
  if (failure.type === 'unreachable') return { reason: 'ServerUnreachable', retry: true };
  const { status, code } = failure;
  if (code === SourceErrors.SOURCE_POLICY_NOT_FOUND.code) {
    return { reason: 'PolicyNotFound', retry: true };
  }
  if (status === 401) return { reason: 'Unauthorized', retry: true };
  if (status === 403) return { reason: 'Forbidden', retry: true };
  // 501: valid but not built in this version; retrying changes nothing.
  if (status === 429 || (status >= 500 && status !== 501))
    return { reason: 'ServerError', retry: true };
  return { reason: 'Refused', retry: false };
}

/**
 * A call to the server failed: Ready False with the reason and the server's message; the
 * mirrored fields stay as last seen. Nothing is deleted on any failure.
 */
export function failed(cr: CustomResource, failure: ServerFailure, now: string): Outcome {
  const { reason, retry } = classify(failure);
  const message =
    failure.type === 'unreachable'
      ? `cannot reach the Touchstone server: ${failure.message}`
      : `the server answered ${failure.status}${failure.code === undefined ? '' : ` ${failure.code}`}: ${failure.message}`;
  return blocked(cr, reason, message, now, retry);
}

/** The Webhook's `secretRef` names a Secret, or a key of it, that does not exist. */
export function secretMissing(
  cr: CustomResource,
  ref: SecretRef,
  secretExists: boolean,
  now: string,
): Outcome {
  const message = secretExists
    ? `Secret ${cr.metadata.namespace}/${ref.name} has no key ${ref.key}`
    : `Secret ${cr.metadata.namespace}/${ref.name} does not exist`;
  return blocked(cr, 'SecretMissing', message, now, true);
}

/** An EvalRun's spec changed after its run was created: runs are records, never changed. */
export function runImmutable(cr: CustomResource, now: string): Outcome {
  return blocked(cr, 'RunImmutable', runImmutableMessage(cr.status?.runId), now, false);
}

export function runImmutableMessage(runId: unknown): string {
  return `run ${String(runId)} was created from an earlier spec and runs never change; delete the EvalRun and create it again to run the new spec`;
}

function blocked(
  cr: CustomResource,
  reason: string,
  message: string,
  now: string,
  retry: boolean,
): Outcome {
  const event = warnOnChange(cr, reason, message);
  return {
    status: { ...cr.status, conditions: [ready(cr, 'False', reason, message, now)] },
    ...(event === undefined ? {} : { event }),
    next: retry ? 'backoff' : 'resync',
  };
}

/** The per-object retry delay after `failures` failures in a row: doubling, capped. */
export function backoffMs(failures: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, failures - 1));
}

/** The finalizers without the operator's: what a finished finalize leaves. */
export function withoutFinalizer(cr: CustomResource): string[] {
  return (cr.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
}

/** Sources of the same namespace that name `policy`: to retry when it appears. */
export function sourcesNaming(sources: CustomResource[], policy: CustomResource): CustomResource[] {
  return sources.filter(
    (s) =>
      s.metadata.namespace === policy.metadata.namespace &&
      ((s.spec.policies ?? []) as string[]).includes(policy.metadata.name),
  );
}

/**
 * Whether a watched change needs a reconcile: the spec (generation), labels, finalizers or
 * deletion changed. A change of status alone is the operator's own write and needs none.
 */
export function changedForUs(previous: CustomResource | undefined, cr: CustomResource): boolean {
  if (previous === undefined) return true;
  const facts = (c: CustomResource) =>
    JSON.stringify([
      c.metadata.generation,
      c.metadata.deletionTimestamp,
      c.metadata.finalizers ?? [],
      c.metadata.labels ?? {},
    ]);
  return facts(previous) !== facts(cr);
}

/** The merge patch that turns status `from` into `to`: fields `to` no longer has become null. */
export function statusPatch(from: Json | undefined, to: Json): Json {
  const old = from ?? {};
  const removed = Object.keys(old).filter((k) => to[k] === undefined);
  const changed = Object.entries(to).filter(
    ([k, v]) => v !== undefined && JSON.stringify(v) !== JSON.stringify(old[k]),
  );
  return { ...Object.fromEntries(removed.map((k) => [k, null])), ...Object.fromEntries(changed) };
}
