import type { Clock, RecordInput, Step, Usage } from '../../core/index.js';
import type { EnvCredentialRef, ProxySettings } from '../../net/index.js';
import type { TargetSpec } from './schema.js';

/** One generation: a record of the dataset and the trial number (0-based). */
export interface TargetCall {
  record: RecordInput;
  trial: number;
}

/** What a target produced for one call; becomes the evaluated record's output, trajectory, usage. */
export interface TargetOutput {
  output: unknown;
  trajectory?: Step[];
  usage?: Usage;
}

export interface Target {
  /** `none` when the spec has no target and the dataset's outputs are evaluated as they are. */
  readonly kind: TargetSpec['kind'] | 'none';
  /** Calls the executor should keep in flight at once. */
  readonly concurrency: number;
  /**
   * Produces the output for one record and trial. Rejects with a `TARGET_*`, `OUTBOUND_*` or
   * `CREDENTIAL_*` TouchstoneError (the executor records it as that record's error), or with
   * `signal.reason` when aborted (a cancelled run, a lost lease).
   */
  generate(call: TargetCall, signal?: AbortSignal): Promise<TargetOutput>;
  /** Releases connections; running commands are killed. Safe to call twice. */
  close(): Promise<void>;
}

/** The `credentials.grants` check (`CredentialResolver.checkGrant` fits). */
export interface GrantCheck {
  checkGrant(ref: EnvCredentialRef, project: string, host: string): void;
}

/**
 * What the place executing a run decides, not the spec's author. A server passes its grants and
 * leaves `allowCommand` and `allowOwnHost` off; the CLI running a spec on the caller's own machine
 * passes `grants: 'all'`, `allowCommand: true` and `allowOwnHost: true` (the caller already owns
 * that environment and network).
 */
export interface TargetDeps {
  /** The run's project: the grant checks are made for it. */
  project: string;
  /** The process environment, handed in by the composition root. */
  env: Readonly<Record<string, string | undefined>>;
  /** How variable names are granted: a grant check, or `all` (every variable of `env`). */
  grants: GrantCheck | 'all';
  /** Allow `command` targets. Default false. */
  allowCommand?: boolean;
  outbound?: {
    /** Host patterns (the `allow_hosts` syntax) that may be private, loopback or plain http. */
    allowHosts?: readonly string[];
    /** Treat the target's own host as allowed (as a judge's configured endpoint is). */
    allowOwnHost?: boolean;
    proxy?: ProxySettings;
  };
  /**
   * The spec file's folder: where a relative `environment.workingDirectory` resolves, and a
   * command target's working directory when the spec names none.
   */
  baseDir?: string;
  clock?: Clock;
  /** Largest answer or stdout accepted. Default 4 MiB. */
  maxOutputBytes?: number;
  /** First retry delay of HTTP targets; doubles per retry. Default 500 ms. */
  retryBaseDelayMs?: number;
}
