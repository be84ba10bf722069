import { Informer } from './informer.js';
import {
  apiDocument,
  type CustomResource,
  FINALIZER,
  type Json,
  KINDS,
  type Kind,
  type KindName,
  secretRefOf,
  serverPath,
} from './kinds.js';
import { type Kube, kubeMessage, kubeStatus } from './kube.js';
import {
  backoffMs,
  type Condition,
  changedForUs,
  failed,
  nextStep,
  type Outcome,
  runImmutable,
  secretMissing,
  sourcesNaming,
  statusPatch,
  synced,
} from './reconcile.js';
import { ServerCallError, type TouchstoneClient } from './server-client.js';

export interface ControllerTiming {
  /** Every object is reconciled again this often, changed or not. */
  resyncMs: number;
  /** How often a synced object whose server status moves (a source, a running run) is read. */
  statusIntervalMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

export interface ControllerLog {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
}

type Key = `${KindName}/${string}`;

/**
 * The work loop: informers feed a queue of object keys (one entry per object, delays merged to
 * the earliest); one worker reconciles them in turn, only while this replica leads. A failure is
 * retried with the object's own backoff; success resets it.
 */
export class Controller {
  private readonly informers: Map<KindName, Informer>;
  private readonly queue = new Set<Key>();
  private readonly timers = new Map<Key, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<Key, number>();
  private resync: NodeJS.Timeout | undefined;
  private working = false;
  private leading = false;
  private idle: Promise<void> = Promise.resolve();

  constructor(
    private readonly kube: Kube,
    private readonly server: TouchstoneClient,
    private readonly timing: ControllerTiming,
    private readonly log: ControllerLog,
  ) {
    this.informers = new Map(
      Object.values(KINDS).map((kind) => [
        kind.kind,
        new Informer(
          kind,
          kube,
          {
            onChange: (cr, previous) => {
              if (changedForUs(previous, cr)) this.enqueue(kind, cr);
            },
            onDelete: (cr) => this.forget(`${kind.kind}/${Informer.key(cr)}`),
            onError: (err) =>
              this.log.warn('watch failed', { kind: kind.kind, err: describe(err) }),
          },
          timing.backoffBaseMs,
        ),
      ]),
    );
  }

  start(): void {
    for (const informer of this.informers.values()) informer.start();
    this.resync = setInterval(() => this.enqueueAll(), this.timing.resyncMs);
  }

  /** Leading: reconcile everything now. Not leading: the queue waits. */
  setLeading(leading: boolean): void {
    this.leading = leading;
    if (leading) this.enqueueAll();
  }

  async stop(): Promise<void> {
    clearInterval(this.resync);
    for (const informer of this.informers.values()) informer.stop();
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.queue.clear();
    await this.idle;
  }

  private enqueueAll(): void {
    for (const [name, informer] of this.informers) {
      for (const cr of informer.list()) this.enqueue(KINDS[name], cr);
    }
  }

  private enqueue(kind: Kind, cr: CustomResource, delayMs = 0): void {
    const key: Key = `${kind.kind}/${Informer.key(cr)}`;
    if (delayMs <= 0) {
      this.queue.add(key);
      this.drain();
      return;
    }
    const at = Date.now() + delayMs;
    const pending = this.timers.get(key);
    if (pending !== undefined && pending.at <= at) return;
    if (pending !== undefined) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.queue.add(key);
      this.drain();
    }, delayMs);
    this.timers.set(key, { at, timer });
  }

  private forget(key: Key): void {
    clearTimeout(this.timers.get(key)?.timer);
    this.timers.delete(key);
    this.failures.delete(key);
    this.queue.delete(key);
  }

  private drain(): void {
    if (this.working || !this.leading) return;
    this.working = true;
    this.idle = (async () => {
      while (this.leading && this.queue.size > 0) {
        const [key] = this.queue as Set<Key>;
        if (key === undefined) break;
        this.queue.delete(key);
        await this.reconcileKey(key);
      }
      this.working = false;
    })();
  }

  private async reconcileKey(key: Key): Promise<void> {
    const slash = key.indexOf('/');
    const kind = KINDS[key.slice(0, slash) as KindName];
    const cr = this.informers.get(kind.kind)?.get(key.slice(slash + 1));
    if (cr === undefined) return;
    try {
      const outcome = await this.reconcile(kind, cr);
      if (outcome !== undefined) await this.finish(kind, cr, outcome);
    } catch (err) {
      // The Kubernetes API refused a write (409: the object changed; the watch brings the new
      // one) or is unreachable: retry with backoff.
      if (kubeStatus(err) !== 409) {
        this.log.warn('reconcile failed', { key, err: describe(err) });
      }
      this.retry(kind, cr, key);
    }
  }

  private retry(kind: Kind, cr: CustomResource, key: Key): void {
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    this.enqueue(
      kind,
      cr,
      backoffMs(failures, this.timing.backoffBaseMs, this.timing.backoffMaxMs),
    );
  }

  /** One pass over an object; undefined when it ended with a Kubernetes write the watch reports. */
  private async reconcile(kind: Kind, cr: CustomResource): Promise<Outcome | undefined> {
    const now = new Date().toISOString();
    const step = nextStep(kind, cr);
    if (step === 'ignore') return undefined;
    if (step === 'add-finalizer') {
      await this.kube.setFinalizers(kind, cr, [...(cr.metadata.finalizers ?? []), FINALIZER]);
      return undefined;
    }
    if (step === 'immutable') return runImmutable(cr, now);
    try {
      if (step === 'finalize') {
        await this.finalize(kind, cr);
        return undefined;
      }
      if (step === 'refresh') {
        const view = await this.read(kind, cr);
        if (view !== undefined) return synced(kind, cr, view, now);
        // Gone from the server (deleted there): apply it again.
      }
      return await this.apply(kind, cr, now);
    } catch (err) {
      if (err instanceof ServerCallError) return failed(cr, err.failure, now);
      throw err;
    }
  }

  /** Deletes the server's resource (already gone is fine), then lets Kubernetes delete the CR. */
  private async finalize(kind: Kind, cr: CustomResource): Promise<void> {
    try {
      await this.server.call('DELETE', serverPath(kind, cr));
    } catch (err) {
      const failure = err instanceof ServerCallError ? err.failure : undefined;
      if (failure?.type !== 'refused' || failure.status !== 404) throw err;
    }
    await this.kube.setFinalizers(
      kind,
      cr,
      (cr.metadata.finalizers ?? []).filter((f) => f !== FINALIZER),
    );
    this.log.info('deleted from the server', { kind: kind.kind, name: cr.metadata.name });
  }

  /** The server's view of the resource, or undefined when it has none. */
  private async read(kind: Kind, cr: CustomResource): Promise<Json | undefined> {
    const path =
      kind.kind === 'EvalRun'
        ? serverPath(kind, cr, String(cr.status?.runId), { view: 'basic' })
        : serverPath(kind, cr);
    try {
      return await this.server.call('GET', path);
    } catch (err) {
      const failure = err instanceof ServerCallError ? err.failure : undefined;
      if (kind.kind !== 'EvalRun' && failure?.type === 'refused' && failure.status === 404) {
        return undefined;
      }
      throw err;
    }
  }

  /** Checks with `validate_only`, then applies (a run: creates it once), then reads the status. */
  private async apply(kind: Kind, cr: CustomResource, now: string): Promise<Outcome> {
    let secret: string | undefined;
    const ref = secretRefOf(cr);
    if (ref !== undefined) {
      const data = await this.kube.secret(cr.metadata.namespace, ref.name);
      secret = data?.[ref.key];
      if (secret === undefined) return secretMissing(cr, ref, data !== undefined, now);
    }
    const document = apiDocument(kind, cr, secret);
    const collection = `v1alpha1/${kind.apiPlural}`;
    await this.server.call('POST', `${collection}?validate_only=true`, document);
    if (kind.kind === 'EvalRun') {
      // Keyed by the object and its generation: a retry after a lost answer creates no second run.
      const created = await this.server.call('POST', collection, document, {
        'idempotency-key': `evalrun-${cr.metadata.uid ?? cr.metadata.name}-${cr.metadata.generation ?? 0}`,
      });
      return synced(kind, cr, created, now);
    }
    await this.server.call('POST', collection, document);
    const view = await this.read(kind, cr);
    return synced(kind, cr, view ?? {}, now);
  }

  private async finish(kind: Kind, cr: CustomResource, outcome: Outcome): Promise<void> {
    const key: Key = `${kind.kind}/${Informer.key(cr)}`;
    const patch = statusPatch(cr.status, outcome.status);
    if (Object.keys(patch).length > 0) await this.kube.patchStatus(kind, cr, patch);
    if (outcome.event !== undefined) {
      await this.kube.event(kind, cr, outcome.event).catch((err: unknown) => {
        this.log.warn('event not recorded', { key, err: describe(err) });
      });
    }
    if (outcome.next === 'backoff') {
      this.retry(kind, cr, key);
      return;
    }
    this.failures.delete(key);
    if (outcome.next === 'poll') this.enqueue(kind, cr, this.timing.statusIntervalMs);
    const nowReady = ((outcome.status.conditions ?? []) as Condition[])[0]?.status === 'True';
    if (kind.kind === 'OnlineEvalPolicy' && nowReady) {
      // Sources that waited for this policy sync now.
      const sources = this.informers.get('TraceSource')?.list() ?? [];
      for (const source of sourcesNaming(sources, cr)) {
        if (source.status?.observedGeneration !== source.metadata.generation) {
          this.enqueue(KINDS.TraceSource, source);
        }
      }
    }
  }
}

function describe(err: unknown): string {
  return kubeMessage(err);
}
