/**
 * The four custom resources the operator reconciles, and how each maps onto the server's REST
 * resource: the API's plural and kind, whether deleting the custom resource deletes the server's
 * resource (a finalizer), and which server fields its status mirrors.
 */

export const GROUP = 'touchstone.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const FINALIZER = 'touchstone.dev/operator';
const PROJECT_LABEL = 'touchstone.dev/project';

export type Json = Record<string, unknown>;

/** A custom resource as the Kubernetes API returns it. */
export interface CustomResource {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    labels?: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
  };
  spec: Json;
  status?: Json;
}

export type KindName = 'TraceSource' | 'OnlineEvalPolicy' | 'EvalRun' | 'Webhook';

export interface Kind {
  kind: KindName;
  /** The custom resource's plural (`tracesources`). */
  plural: string;
  /** The REST resource's plural (`v1alpha1/sources`). */
  apiPlural: string;
  /** The kind the API's declarative form names. */
  apiKind: string;
  /** Deleting the custom resource deletes the server's resource first. */
  finalizer: boolean;
  /** The status fields mirrored from the server's view of the resource. */
  mirror(view: Json): Json;
}

const RUN_PHASES: Record<string, string> = {
  RUN_STATUS_PENDING: 'Pending',
  RUN_STATUS_RUNNING: 'Running',
  RUN_STATUS_SUCCEEDED: 'Succeeded',
  RUN_STATUS_FAILED: 'Failed',
  RUN_STATUS_ERROR: 'Error',
  RUN_STATUS_CANCELLED: 'Cancelled',
};

/** Phases after which a run never changes: its EvalRun needs no more polling. */
export const FINAL_RUN_PHASES: ReadonlySet<string> = new Set([
  'Succeeded',
  'Failed',
  'Error',
  'Cancelled',
]);

/** Only the keys present in `from` (a server view leaves out what it does not know). */
function pick(from: Json, keys: readonly string[]): Json {
  return Object.fromEntries(keys.filter((k) => from[k] !== undefined).map((k) => [k, from[k]]));
}

const SOURCE_FIELDS = [
  'phase',
  'lagSeconds',
  'recordsPerSecond',
  'watermark',
  'deferred',
  'pulled',
  'scored',
  'deadLetters',
  'lastError',
  'lastWriteBack',
  'lastRunId',
  'missedWindows',
] as const;

function sourceStatus(view: Json): Json {
  const status = (view.status ?? {}) as Json;
  return {
    ...pick(status, SOURCE_FIELDS),
    ...(status.lastScheduledAt === undefined ? {} : { lastScheduled: status.lastScheduledAt }),
  };
}

function policyStatus(view: Json): Json {
  const alerts = (((view.status ?? {}) as Json).alerts ?? []) as Json[];
  return {
    alertsFiring: alerts.filter((a) => a.firing === true).length,
    alerts: alerts.map((a) => pick(a, ['metric', 'firing', 'mean', 'n', 'changedAt'])),
  };
}

/** `helpfulness >= 0.7`: a gate as the server states it (`{metric, min|max}`). */
function gateText(gate: unknown): string {
  const g = (gate ?? {}) as Json;
  if (g.min !== undefined) return `${String(g.metric)} >= ${String(g.min)}`;
  if (g.max !== undefined) return `${String(g.metric)} <= ${String(g.max)}`;
  return String(g.metric ?? '');
}

function runStatus(view: Json): Json {
  const gates = (view.gates ?? []) as Json[];
  return {
    runId: view.id,
    phase: RUN_PHASES[String(view.status)] ?? 'Pending',
    gatesPassed: gates.filter((g) => g.passed === true).length,
    gatesTotal: gates.length,
    gates: gates.map((g) => ({
      gate: gateText(g.gate),
      passed: g.passed === true,
      ...(typeof g.value === 'number' ? { value: g.value } : {}),
    })),
    ...(view.finishedAt === undefined ? {} : { finishedAt: view.finishedAt }),
  };
}

export const KINDS: Record<KindName, Kind> = {
  TraceSource: {
    kind: 'TraceSource',
    plural: 'tracesources',
    apiPlural: 'sources',
    apiKind: 'TraceSource',
    finalizer: true,
    mirror: sourceStatus,
  },
  OnlineEvalPolicy: {
    kind: 'OnlineEvalPolicy',
    plural: 'onlineevalpolicies',
    apiPlural: 'policies',
    apiKind: 'OnlineEvalPolicy',
    finalizer: true,
    mirror: policyStatus,
  },
  EvalRun: {
    kind: 'EvalRun',
    plural: 'evalruns',
    apiPlural: 'runs',
    apiKind: 'Run',
    // A run is a record: deleting its EvalRun keeps the run and its results on the server.
    finalizer: false,
    mirror: runStatus,
  },
  Webhook: {
    kind: 'Webhook',
    plural: 'webhooks',
    apiPlural: 'webhooks',
    apiKind: 'Webhook',
    finalizer: true,
    mirror: (view) => pick(view, ['secretSet']),
  },
};

/** The project a custom resource names (its label), if any: else the credential's own. */
export function projectOf(cr: CustomResource): string | undefined {
  return cr.metadata.labels?.[PROJECT_LABEL];
}

/** The REST path of the server's resource for `cr` (a run by the id its status holds). */
export function serverPath(
  kind: Kind,
  cr: CustomResource,
  id = cr.metadata.name,
  query: Record<string, string> = {},
): string {
  const project = projectOf(cr);
  const q = new URLSearchParams({ ...query, ...(project === undefined ? {} : { project }) });
  const qs = q.toString();
  return `v1alpha1/${kind.apiPlural}/${encodeURIComponent(id)}${qs === '' ? '' : `?${qs}`}`;
}

/** A key of a Secret in the resource's namespace (a Webhook's `secretRef`). */
export interface SecretRef {
  name: string;
  key: string;
}

export function secretRefOf(cr: CustomResource): SecretRef | undefined {
  const ref = cr.spec.secretRef as SecretRef | undefined;
  return ref === undefined ? undefined : { name: ref.name, key: ref.key };
}

/**
 * The API's declarative document for `cr`: its name and labels, and its spec; a Webhook's
 * `secretRef` is replaced by the Secret's value.
 */
export function apiDocument(kind: Kind, cr: CustomResource, secret?: string): Json {
  const { secretRef: _, ...spec } = cr.spec;
  const labels = cr.metadata.labels;
  return {
    apiVersion: API_VERSION,
    kind: kind.apiKind,
    metadata: {
      name: cr.metadata.name,
      ...(labels === undefined || Object.keys(labels).length === 0 ? {} : { labels }),
    },
    spec: secret === undefined ? spec : { ...spec, secret },
  };
}
