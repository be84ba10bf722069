import {
  type Dropped,
  type EvalRecord,
  type NormalizedTrace,
  type Span,
  serviceName,
  type TraceSummary,
  type Usage,
  ZERO_TRACE_ID,
} from '../../core/index.js';
import { textView } from './precedence.js';
import { LABEL_PREFIX, labelsFrom } from './reader.js';
import { sdkRecordFields } from './touchstone-sdk.js';
import { buildTrace, droppedOf, type SpanNode, type StepDraft, toSteps } from './trajectory.js';
import {
  compareNanos,
  decodeJsonEncoded,
  durationMs,
  isObject,
  isoOf,
  withParseCache,
} from './values.js';

export interface NormalizeOptions {
  /** The project the trace belongs to; recorded in `metadata.project`. */
  project?: string;
}

/** Resource attribute prefixes under which trace-store connectors put tags and metadata. */
const RESOURCE_LABEL_PREFIXES = ['', 'mlflow.tag.', 'mlflow.metadata.'];

function isSpan(value: unknown): value is Span {
  if (!isObject(value)) return false;
  const s = value as Partial<Span>;
  return (
    typeof s.spanId === 'string' &&
    typeof s.traceId === 'string' &&
    typeof s.name === 'string' &&
    isObject(s.attributes)
  );
}

/** Whether a span already has the model's shape (as every span the store gives back has). */
function isTidy(span: Span): boolean {
  return (
    typeof span.parentSpanId === 'string' &&
    typeof span.startTimeUnixNano === 'string' &&
    typeof span.endTimeUnixNano === 'string' &&
    Array.isArray(span.events) &&
    eventsTidy(span.events) &&
    Array.isArray(span.links) &&
    isObject(span.status) &&
    isObject(span.resource) &&
    isObject(span.scope)
  );
}

function eventsTidy(events: Span['events']): boolean {
  for (const e of events) if (!isObject(e) || !isObject(e.attributes)) return false;
  return true;
}

/**
 * Fills the optional parts of a span so readers can rely on the model's shape; a span that has
 * it is used as it is (nothing in normalization writes to a span).
 */
function tidy(span: Span): Span | undefined {
  // Logfire sends a placeholder for each open span; the real span follows (§9.3).
  if (span.attributes['logfire.span_type'] === 'pending_span') return undefined;
  if (isTidy(span)) return span;
  return {
    ...span,
    parentSpanId: typeof span.parentSpanId === 'string' ? span.parentSpanId : '',
    startTimeUnixNano: String(span.startTimeUnixNano ?? '0'),
    endTimeUnixNano: String(span.endTimeUnixNano ?? '0'),
    events: Array.isArray(span.events)
      ? span.events.filter((e) => isObject(e) && isObject(e.attributes))
      : [],
    links: Array.isArray(span.links) ? span.links : [],
    status: isObject(span.status) ? span.status : { code: 0, message: '' },
    resource: isObject(span.resource) ? span.resource : {},
    scope: isObject(span.scope) ? span.scope : { name: '', version: '' },
  };
}

function byStart(nodes: readonly SpanNode[]): SpanNode[] {
  return [...nodes].sort(
    (a, b) => compareNanos(a.start, b.start) || a.span.spanId.localeCompare(b.span.spanId),
  );
}

/**
 * Each distinct object once, in the order of its last occurrence: assigning their labels in this
 * order gives what assigning them for every occurrence gives, and the spans of one resource share
 * its object, so a large resource is read once, not once per span.
 */
function byLastUse<T>(list: readonly T[]): T[] {
  const seen = new Set<T>();
  const out: T[] = [];
  for (let i = list.length - 1; i >= 0; i--) {
    const item = list[i]!;
    if (seen.has(item)) continue;
    seen.add(item);
    out.push(item);
  }
  return out.reverse();
}

/**
 * Labels from `touchstone.label.<key>`: resource attributes (also under the `mlflow.tag.` and
 * `mlflow.metadata.` prefixes a trace-store connector writes) are the defaults of the process;
 * span attributes and convention metadata override them, the earliest span first; the root
 * span's own labels win over everything.
 */
function labels(ordered: readonly SpanNode[], root: SpanNode | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  const resources: Span['resource'][] = [];
  for (let i = ordered.length - 1; i >= 0; i--)
    resources.push((ordered[i] as SpanNode).span.resource);
  if (root) resources.push(root.span.resource);
  for (const resource of byLastUse(resources)) {
    // Under every prefix a label key holds the mark: the other attributes are not looked at.
    const marked: [string, unknown][] = [];
    for (const key in resource) if (key.includes(LABEL_PREFIX)) marked.push([key, resource[key]]);
    if (marked.length === 0) continue;
    for (const prefix of RESOURCE_LABEL_PREFIXES) {
      Object.assign(out, labelsFrom(marked, prefix, decodeJsonEncoded));
    }
  }
  for (let i = ordered.length - 1; i >= 0; i--) {
    const n = ordered[i] as SpanNode;
    if (n !== root) Object.assign(out, n.reading.labels);
  }
  if (root) Object.assign(out, root.reading.labels);
  return out;
}

function sumUsage(steps: readonly StepDraft[]): Usage {
  const out: Usage = {};
  const add = (key: 'inputTokens' | 'outputTokens' | 'totalTokens' | 'costUsd', v?: number) => {
    if (v === undefined) return;
    out[key] = (out[key] ?? 0) + v;
  };
  for (const s of steps) {
    // Containers (agent runs, Vercel roots) repeat their children's usage: only model calls count.
    if (s.type !== 'llm' && s.type !== 'embedding') continue;
    add('inputTokens', s.usage?.inputTokens);
    add('outputTokens', s.usage?.outputTokens);
    add('totalTokens', s.usage?.totalTokens);
    add('costUsd', s.usage?.costUsd);
  }
  // Sums of float costs drift (0.0007 + 0.0005); nine decimals is far below a cent.
  if (out.costUsd !== undefined) out.costUsd = Math.round(out.costUsd * 1e9) / 1e9;
  for (const key of Object.keys(out) as Array<keyof Usage>) {
    if (!Number.isFinite(out[key])) delete out[key];
  }
  return out;
}

/** What the trace's spans lost, summed: drops on spans that are not steps show here too. */
function droppedTotals(nodes: readonly SpanNode[]): Dropped | undefined {
  let out: Dropped | undefined;
  for (const n of nodes) {
    const dropped = droppedOf(n.span);
    if (dropped === undefined) continue;
    out ??= {};
    for (const [field, count] of Object.entries(dropped) as [keyof Dropped, number][]) {
      out[field] = (out[field] ?? 0) + count;
    }
  }
  return out;
}

/** The non-empty names of some steps (or spans), each once in order of first appearance. */
function distinct<T>(items: readonly T[], name: (item: T) => string | undefined): string[] {
  const seen = new Set<string>();
  for (const item of items) {
    const v = name(item);
    if (v) seen.add(v);
  }
  return [...seen];
}

/** Retrieved document texts, for evaluators that judge answers against their context. */
function context(steps: readonly StepDraft[]): unknown[] {
  const out: unknown[] = [];
  for (const s of steps) {
    if (s.type !== 'retrieval' || !Array.isArray(s.output)) continue;
    for (const doc of s.output) {
      if (typeof doc === 'string') out.push(doc);
      else if (
        isObject(doc) &&
        (typeof doc.content === 'string' || typeof doc.page_content === 'string')
      ) {
        out.push(doc.content ?? doc.page_content);
      }
    }
  }
  return out;
}

function firstSdkFields(ordered: readonly SpanNode[]) {
  for (const n of ordered) {
    const fields = sdkRecordFields(n.span);
    if (fields !== undefined) return fields;
  }
  return undefined;
}

/**
 * Reads the spans of one trace (any order, any mix of conventions, possibly still without its
 * root) into the Record evaluators see and the trace's summary. Never throws: spans whose
 * attributes are garbage give steps with empty fields.
 */
export function normalizeTrace(
  spans: readonly Span[],
  options: NormalizeOptions = {},
): NormalizedTrace {
  return withParseCache(() => normalize(spans, options));
}

function normalize(spans: readonly Span[], options: NormalizeOptions): NormalizedTrace {
  const usable: Span[] = [];
  for (const span of Array.isArray(spans) ? spans : []) {
    const tidied = isSpan(span) ? tidy(span) : undefined;
    if (tidied !== undefined) usable.push(tidied);
  }
  const tree = buildTrace(usable);
  const { root, steps } = tree;
  const ordered = byStart(tree.nodes);
  const earliest = ordered[0];
  const traceId = root?.span.traceId || earliest?.span.traceId || ZERO_TRACE_ID;

  const trajectory = toSteps(steps);
  const llmSteps = steps.filter((s) => s.type === 'llm');

  // Record input/output: Langfuse trace-level values, the root's own, then the model calls; all
  // as text views (the question, the answer) when they are chat transcripts.
  const traceIoNode = root?.reading.traceIo ? root : ordered.find((n) => n.reading.traceIo);
  const traceIo = traceIoNode?.reading.traceIo;
  // Fields the logging SDK states outright are the record as its caller meant it: kept as sent.
  const sdk = (root && sdkRecordFields(root.span)) ?? firstSdkFields(ordered);
  let input = traceIo?.input;
  let output = traceIo?.output;
  if (root) {
    const rootStep = steps.find((s) => s.node === root);
    input ??= rootStep?.type === 'tool' ? rootStep.toolArguments : root.reading.content().input;
    output ??= rootStep?.type === 'tool' ? rootStep.toolResult : root.reading.content().output;
  }
  input ??= llmSteps[0]?.input;
  output ??= llmSteps[llmSteps.length - 1]?.output;
  if (input !== undefined) input = textView(input, 'input');
  if (output !== undefined) output = textView(output, 'output');
  if (sdk?.input !== undefined) input = sdk.input;
  if (sdk?.output !== undefined) output = sdk.output;

  let minStart: string | undefined;
  let maxEnd: string | undefined;
  for (const n of tree.nodes) {
    if (n.start !== '0' && (minStart === undefined || compareNanos(n.start, minStart) < 0)) {
      minStart = n.start;
    }
    if (maxEnd === undefined || compareNanos(n.end, maxEnd) > 0) maxEnd = n.end;
  }
  const traceMs = minStart !== undefined && maxEnd !== undefined ? durationMs(minStart, maxEnd) : 0;

  const usage = sumUsage(steps);
  if (Object.keys(usage).length === 0 && root) Object.assign(usage, root.reading.content().usage);
  delete usage.latencyMs;
  usage.latencyMs = root ? durationMs(root.start, root.end) : traceMs;

  const labelMap = labels(ordered, root);
  const sessionNode = root?.reading.session ? root : ordered.find((n) => n.reading.session);
  const userNode = root?.reading.user ? root : ordered.find((n) => n.reading.user);
  const head = root ?? earliest;

  const metadata: Record<string, unknown> = { ...sdk?.metadata };
  const service = head ? serviceName(head.span) : '';
  if (service) metadata.service = service;
  if (head) metadata.rootSpan = head.span.name;
  if (sessionNode?.reading.session) metadata.sessionId = sessionNode.reading.session;
  if (userNode?.reading.user) metadata.userId = userNode.reading.user;
  const models = distinct(steps, (s) => (s.type === 'llm' ? s.model : undefined));
  if (models.length > 0) metadata.models = models;
  const tools = distinct(trajectory, (s) => (s.type === 'tool' ? s.name : undefined));
  if (tools.length > 0) metadata.tools = tools;
  const conventions: string[] = [];
  for (const n of tree.nodes) {
    for (const c of n.reading.conventions) if (!conventions.includes(c)) conventions.push(c);
  }
  if (sdk !== undefined) conventions.push('touchstone-sdk');
  if (conventions.length > 0) metadata.conventions = conventions;
  if (options.project) metadata.project = options.project;
  const dropped = droppedTotals(tree.nodes);
  if (dropped !== undefined) metadata.dropped = dropped;

  const record: EvalRecord = { id: traceId, trajectory, usage, metadata, labels: labelMap };
  if (input !== undefined) record.input = input;
  if (output !== undefined) record.output = output;
  const docs = context(steps);
  if (sdk?.context !== undefined) record.context = sdk.context;
  else if (docs.length > 0) record.context = docs;
  if (sdk?.reference !== undefined) record.reference = sdk.reference;
  record.provenance = { traceId };

  const failed = tree.nodes.some((n) => n.reading.failed) || trajectory.some((s) => s.error !== '');
  const summary: TraceSummary = {
    traceId,
    service,
    name: head?.span.name ?? '',
    startTime: (minStart !== undefined ? isoOf(minStart) : undefined) ?? new Date(0).toISOString(),
    durationMs: traceMs,
    steps: trajectory.length,
    error: failed,
    labels: { ...labelMap },
  };
  return { record, summary };
}
