import type { Kube, LeaseRecord } from './kube.js';

/**
 * Leader election on a coordination.k8s.io Lease: one operator replica reconciles, the others
 * keep their caches warm and take over once the leader's lease lapses (or it hands it back on
 * shutdown).
 */

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  durationMs: number;
  /** How often the leader renews and the others look; well under `durationMs`. */
  retryMs: number;
}

/**
 * The Lease to write to be (or stay) leader, or undefined when another holder's lease is still
 * current. `now`: epoch ms.
 */
export function claim(
  lease: LeaseRecord | undefined,
  identity: string,
  durationMs: number,
  now: number,
): LeaseRecord | undefined {
  const durationSeconds = Math.max(1, Math.ceil(durationMs / 1000));
  if (lease === undefined) {
    return { holder: identity, durationSeconds, renewedAt: now, transitions: 0 };
  }
  const lapsed = now > lease.renewedAt + lease.durationSeconds * 1000;
  if (lease.holder !== identity && lease.holder !== '' && !lapsed) return undefined;
  return {
    ...lease,
    holder: identity,
    durationSeconds,
    renewedAt: now,
    transitions: lease.holder === identity ? lease.transitions : lease.transitions + 1,
  };
}

export class LeaderElector {
  private timer: NodeJS.Timeout | undefined;
  private leading = false;
  private lastRenewed = 0;
  private stopped = false;

  constructor(
    private readonly kube: Kube,
    private readonly options: LeaderOptions,
    private readonly onChange: (leading: boolean) => void,
    private readonly onError: (err: unknown) => void,
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    void this.tick();
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const { namespace, name, identity, durationMs } = this.options;
    try {
      const lease = await this.kube.readLease(namespace, name);
      const next = claim(lease, identity, durationMs, Date.now());
      if (next === undefined) {
        this.set(false);
      } else {
        await this.kube.writeLease(namespace, name, next);
        this.lastRenewed = Date.now();
        this.set(true);
      }
    } catch (err) {
      // A lost race (409) or an unreachable API: a leader that cannot renew in time steps down.
      if (this.leading && Date.now() - this.lastRenewed > durationMs) this.set(false);
      this.onError(err);
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.options.retryMs);
  }

  private set(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.onChange(leading);
  }

  /** Stops electing and, when leading, hands the Lease back so another replica takes over now. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (!this.leading) return;
    this.set(false);
    const { namespace, name, identity } = this.options;
    try {
      const lease = await this.kube.readLease(namespace, name);
      if (lease?.holder === identity) {
        await this.kube.writeLease(namespace, name, { ...lease, holder: '', renewedAt: 0 });
      }
    } catch (err) {
      this.onError(err);
    }
  }
}
