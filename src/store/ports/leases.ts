/** Storage port: named leases: who does singleton work across replicas. The conventions are in ../ports.ts. */

export interface Lease {
  holder: string;
  /** When the lease lapses unless renewed. May be in the past: an expired lease is free. */
  expiresAt: string;
  /** When the current holder took it (renewals keep it). */
  acquiredAt: string;
}

/**
 * Named leases decide who does singleton work across replicas (a trace source's pull, the webhook
 * dispatcher). Holders are unique per process and task, e.g. `<replica id>/source/<name>`.
 */
export interface LeaseStore {
  /**
   * Takes or renews the lease for `ttlMs` from now, in one conditional statement: succeeds when
   * the lease is free, expired, or already held by `holder`. Returns false while another holder's
   * lease is unexpired.
   */
  acquire(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if `holder` holds it; otherwise does nothing. */
  release(name: string, holder: string): Promise<void>;
  /** The lease row as stored (possibly expired), or undefined when nobody has taken it. */
  get(name: string): Promise<Lease | undefined>;
}
