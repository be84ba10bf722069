import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Lease,
  V1MicroTime,
  Watch,
} from '@kubernetes/client-node';
import { type CustomResource, GROUP, type Json, type Kind, VERSION } from './kinds.js';
import type { KubeEvent } from './reconcile.js';

/**
 * What the operator asks of the Kubernetes API, through @kubernetes/client-node: the custom
 * resources (list, watch, finalizers, status), Secrets, Events and the leader Lease.
 */

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: CustomResource & { code?: number };
}

/** An answer other than 2xx; `status` is the HTTP status (409 conflict, 404, 410 gone). */
export function kubeStatus(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  const code = (err as { statusCode?: unknown } | undefined)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** A short description of a failed Kubernetes call: its status and the API's message. */
export function kubeMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body = typeof err.body === 'string' ? safeParse(err.body) : err.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    return `HTTP ${err.code}${typeof message === 'string' ? `: ${message}` : ''}`;
  }
  return err instanceof Error ? err.message : String(err);
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export interface LeaseRecord {
  holder: string;
  durationSeconds: number;
  renewedAt: number;
  transitions: number;
  resourceVersion?: string;
}

export class Kube {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly coordination: CoordinationV1Api;

  constructor(
    private readonly config: KubeConfig,
    /** Empty: every namespace. */
    private readonly namespace: string,
    private readonly component: string,
  ) {
    this.custom = config.makeApiClient(CustomObjectsApi);
    this.core = config.makeApiClient(CoreV1Api);
    this.coordination = config.makeApiClient(CoordinationV1Api);
  }

  private base(kind: Kind) {
    return { group: GROUP, version: VERSION, plural: kind.plural };
  }

  async list(kind: Kind): Promise<{ items: CustomResource[]; resourceVersion: string }> {
    const list = (await (this.namespace === ''
      ? this.custom.listClusterCustomObject(this.base(kind))
      : this.custom.listNamespacedCustomObject({
          ...this.base(kind),
          namespace: this.namespace,
        }))) as { items: CustomResource[]; metadata: { resourceVersion: string } };
    return { items: list.items, resourceVersion: list.metadata.resourceVersion };
  }

  /** Streams changes after `resourceVersion`; resolves to a function that stops the watch. */
  async watch(
    kind: Kind,
    resourceVersion: string,
    onEvent: (event: WatchEvent) => void,
    onDone: (err: unknown) => void,
  ): Promise<() => void> {
    const ns = this.namespace === '' ? '' : `/namespaces/${this.namespace}`;
    const path = `/apis/${GROUP}/${VERSION}${ns}/${kind.plural}`;
    const controller = await new Watch(this.config).watch(
      path,
      { resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 300 },
      (type, object) => onEvent({ type, object } as WatchEvent),
      onDone,
    );
    return () => controller.abort();
  }

  /** Sets the finalizers, failing with 409 when the object changed since it was read. */
  async setFinalizers(kind: Kind, cr: CustomResource, finalizers: string[]): Promise<void> {
    await this.custom.patchNamespacedCustomObject(
      {
        ...this.base(kind),
        namespace: cr.metadata.namespace,
        name: cr.metadata.name,
        body: { metadata: { finalizers, resourceVersion: cr.metadata.resourceVersion } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /** A merge patch of the status subresource (null removes a field). */
  async patchStatus(kind: Kind, cr: CustomResource, status: Json): Promise<void> {
    await this.custom.patchNamespacedCustomObjectStatus(
      {
        ...this.base(kind),
        namespace: cr.metadata.namespace,
        name: cr.metadata.name,
        body: { status },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /** A Secret's keys and values (decoded), or undefined when there is no such Secret. */
  async secret(namespace: string, name: string): Promise<Record<string, string> | undefined> {
    try {
      const secret = await this.core.readNamespacedSecret({ namespace, name });
      return Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
      );
    } catch (err) {
      if (kubeStatus(err) === 404) return undefined;
      throw err;
    }
  }

  async event(kind: Kind, cr: CustomResource, event: KubeEvent): Promise<void> {
    const now = new Date();
    await this.core.createNamespacedEvent({
      namespace: cr.metadata.namespace,
      body: {
        metadata: { generateName: `${cr.metadata.name}.`, namespace: cr.metadata.namespace },
        involvedObject: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: kind.kind,
          name: cr.metadata.name,
          namespace: cr.metadata.namespace,
          ...(cr.metadata.uid === undefined ? {} : { uid: cr.metadata.uid }),
        },
        type: event.type,
        reason: event.reason,
        message: event.message,
        source: { component: this.component },
        reportingComponent: this.component,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  }

  async readLease(namespace: string, name: string): Promise<LeaseRecord | undefined> {
    try {
      const lease = await this.coordination.readNamespacedLease({ namespace, name });
      const spec = lease.spec ?? {};
      return {
        holder: spec.holderIdentity ?? '',
        durationSeconds: spec.leaseDurationSeconds ?? 0,
        renewedAt: spec.renewTime === undefined ? 0 : new Date(spec.renewTime).getTime(),
        transitions: spec.leaseTransitions ?? 0,
        ...(lease.metadata?.resourceVersion === undefined
          ? {}
          : { resourceVersion: lease.metadata.resourceVersion }),
      };
    } catch (err) {
      if (kubeStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** Creates or replaces the Lease (replace fails with 409 if someone else wrote it since). */
  async writeLease(namespace: string, name: string, lease: LeaseRecord): Promise<void> {
    const body: V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name,
        namespace,
        ...(lease.resourceVersion === undefined ? {} : { resourceVersion: lease.resourceVersion }),
      },
      spec: {
        holderIdentity: lease.holder,
        leaseDurationSeconds: lease.durationSeconds,
        // A MicroTime: the API server refuses the milliseconds a plain Date is written with.
        renewTime: new V1MicroTime(lease.renewedAt),
        leaseTransitions: lease.transitions,
      },
    };
    if (lease.resourceVersion === undefined) {
      await this.coordination.createNamespacedLease({ namespace, body });
    } else {
      await this.coordination.replaceNamespacedLease({ namespace, name, body });
    }
  }
}
