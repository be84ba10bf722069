import type { CustomResource, Kind } from './kinds.js';
import { type Kube, kubeStatus, type WatchEvent } from './kube.js';

/**
 * A cache of one kind's custom resources kept by list + watch: it lists, watches from the
 * list's resourceVersion, re-watches from the last version seen when a watch ends, and lists
 * again when the version is too old (410 Gone). Every change, and every object at each list, is
 * handed to `onChange`; `onDelete` hears objects that left.
 */
export class Informer {
  private readonly cache = new Map<string, CustomResource>();
  private resourceVersion = '';
  private stopWatch: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    readonly kind: Kind,
    private readonly kube: Kube,
    private readonly handlers: {
      /** `previous`: the object as cached before, if it was. */
      onChange(cr: CustomResource, previous: CustomResource | undefined): void;
      onDelete(cr: CustomResource): void;
      onError(err: unknown): void;
    },
    private readonly retryMs: number,
  ) {}

  static key(cr: CustomResource): string {
    return `${cr.metadata.namespace}/${cr.metadata.name}`;
  }

  get(key: string): CustomResource | undefined {
    return this.cache.get(key);
  }

  list(): CustomResource[] {
    return [...this.cache.values()];
  }

  start(): void {
    void this.relist();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.stopWatch?.();
  }

  private later(fn: () => Promise<void>): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void fn(), this.retryMs);
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    try {
      const { items, resourceVersion } = await this.kube.list(this.kind);
      const seen = new Set(items.map(Informer.key));
      for (const [key, cr] of this.cache) {
        if (!seen.has(key)) {
          this.cache.delete(key);
          this.handlers.onDelete(cr);
        }
      }
      // A relist hands every object on as new: what changed while no watch ran is not known.
      for (const cr of items) {
        this.cache.delete(Informer.key(cr));
        this.upsert(cr);
      }
      this.resourceVersion = resourceVersion;
    } catch (err) {
      this.handlers.onError(err);
      this.later(() => this.relist());
      return;
    }
    await this.watch();
  }

  private async watch(): Promise<void> {
    if (this.stopped) return;
    let gone = false;
    const onEvent = (event: WatchEvent) => {
      if (event.type === 'ERROR') {
        gone = event.object.code === 410;
        if (!gone) this.handlers.onError(new Error(`watch error ${String(event.object.code)}`));
        return;
      }
      const version = event.object.metadata?.resourceVersion;
      if (version !== undefined) this.resourceVersion = version;
      if (event.type === 'BOOKMARK') return;
      if (event.type === 'DELETED') {
        this.cache.delete(Informer.key(event.object));
        this.handlers.onDelete(event.object);
      } else {
        this.upsert(event.object);
      }
    };
    const onDone = (err: unknown) => {
      this.stopWatch = undefined;
      if (this.stopped) return;
      if (gone || kubeStatus(err) === 410) {
        void this.relist();
      } else if (err !== null && err !== undefined && (err as Error).name !== 'TimeoutError') {
        this.handlers.onError(err);
        this.later(() => this.relist());
      } else {
        // Ended by the server, or quiet longer than the client's inactivity timeout: go on from
        // the last version seen.
        void this.watch();
      }
    };
    try {
      this.stopWatch = await this.kube.watch(this.kind, this.resourceVersion, onEvent, onDone);
    } catch (err) {
      this.handlers.onError(err);
      this.later(() => this.relist());
    }
  }

  private upsert(cr: CustomResource): void {
    const key = Informer.key(cr);
    const previous = this.cache.get(key);
    this.cache.set(key, cr);
    this.handlers.onChange(cr, previous);
  }
}
