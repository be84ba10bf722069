import type { Dropped, Message, Span, Step, StepType, ToolCall, Usage } from '../../core/index.js';
import { readSpan, type SpanReading } from './precedence.js';
import type { SpanContext } from './reader.js';
import {
  canonicalJson,
  compareNanos,
  isoOf,
  jsonSafeAttributes,
  nanosText,
  rawArguments,
  tryParse,
} from './values.js';

/**
 * Conventions reference §11, the rules across spans: the span tree, the Record root, which spans
 * are steps (containers are not), one step per model call and per tool call when several
 * instrumentations describe it, trajectory order, and tool ↔ call linking.
 */

/** The children of every leaf: never written to (a node gets its own list for its first child). */
const NO_CHILDREN: SpanNode[] = [];

/**
 * A span in its trace's tree; also the context its readers are given (one object per span: a
 * context object and a closure per span were a share of what normalization allocated).
 */
export class SpanNode implements SpanContext {
  parent?: SpanNode;
  /** NO_CHILDREN until one is linked (most spans are leaves). */
  children: SpanNode[] = NO_CHILDREN;
  depth = 0;
  reading: SpanReading = undefined as unknown as SpanReading;
  private below?: Span[];

  constructor(
    readonly span: Span,
    /** Unix nanoseconds as `nanosText` ('0' when absent): compared with `compareNanos`. */
    readonly start: string,
    readonly end: string,
  ) {}

  get isRoot(): boolean {
    return this.span.parentSpanId === '';
  }

  descendants(): readonly Span[] {
    this.below ??= descendants(this).map((d) => d.span);
    return this.below;
  }
}

/** A step before it is written out; `node` is the span the step stands for. */
export interface StepDraft {
  node: SpanNode;
  type: StepType;
  name: string;
  model?: string;
  /** `model` is the model that answered, not only the one asked for. */
  modelServed?: boolean;
  input?: unknown;
  output?: unknown;
  usage?: Usage;
  error: string;
  /** Tool steps: call id (linking only; the Step has no field for it). */
  toolCallId?: string;
  toolName?: string;
  toolArguments?: string;
  toolResult?: unknown;
  toolResultPresent?: boolean;
}

export interface TraceTree {
  nodes: SpanNode[];
  root?: SpanNode;
  steps: StepDraft[];
}

/** Nodes with a parent link (a parent not in the trace is a temporary root), cycles cut. */
function buildTree(spans: readonly Span[]): SpanNode[] {
  const nodes = new Map<string, SpanNode>();
  for (const span of spans) {
    const seen = nodes.get(span.spanId);
    // A span sent twice (client retry, or once open and once ended): keep the ended/later one.
    if (
      seen &&
      compareNanos(
        nanosText(span.endTimeUnixNano) ?? '0',
        nanosText(seen.span.endTimeUnixNano) ?? '0',
      ) < 0
    ) {
      continue;
    }
    const start = nanosText(span.startTimeUnixNano) ?? '0';
    const end = nanosText(span.endTimeUnixNano) ?? '0';
    nodes.set(span.spanId, new SpanNode(span, start, compareNanos(end, start) >= 0 ? end : start));
  }
  for (const node of nodes.values()) {
    const pid = node.span.parentSpanId;
    const parent = pid && pid !== node.span.spanId ? nodes.get(pid) : undefined;
    if (!parent) continue;
    // Refuse a link that would close a cycle (garbage ids must not hang the walk).
    let up: SpanNode | undefined = parent;
    let cycle = false;
    for (let i = 0; up && i <= nodes.size; i++, up = up.parent) {
      if (up === node) {
        cycle = true;
        break;
      }
    }
    if (cycle) continue;
    node.parent = parent;
    if (parent.children === NO_CHILDREN) parent.children = [];
    parent.children.push(node);
  }
  const list = [...nodes.values()];
  for (const node of list) {
    let d = 0;
    for (let up = node.parent; up; up = up.parent) d++;
    node.depth = d;
  }
  return list;
}

function descendants(node: SpanNode): SpanNode[] {
  const out: SpanNode[] = [];
  const stack = [...node.children];
  while (stack.length > 0) {
    const n = stack.pop() as SpanNode;
    out.push(n);
    stack.push(...n.children);
  }
  return out;
}

/** The Record root: a parentless span, agents first, then the earliest (§11.1). */
function pickRoot(nodes: readonly SpanNode[]): SpanNode | undefined {
  const roots = nodes.filter((n) => n.span.parentSpanId === '');
  roots.sort(
    (a, b) =>
      Number(b.reading.type === 'agent') - Number(a.reading.type === 'agent') ||
      compareNanos(a.start, b.start) ||
      a.span.spanId.localeCompare(b.span.spanId),
  );
  return roots[0];
}

function draft(node: SpanNode, type: StepType): StepDraft {
  const c = node.reading.content();
  const tool = type === 'tool';
  const t = tool ? (c.tool ?? {}) : undefined;
  // Every field in the literal, so every draft has one shape. The usage object is the content's:
  // nothing writes to either (a wrapper's usage is merged into a new object).
  return {
    node,
    type,
    name: c.name,
    model: c.model || undefined,
    modelServed: c.model ? c.modelServed === true : undefined,
    input: tool ? undefined : c.input,
    output: tool ? undefined : c.output,
    usage: c.usage,
    error: c.error,
    toolCallId: t?.id,
    toolName: t?.name,
    toolArguments: t?.arguments,
    toolResult: t?.result,
    toolResultPresent: t ? t.resultPresent === true : undefined,
  };
}

const LEAF_TYPES = new Set<StepType>(['llm', 'tool', 'retrieval', 'embedding', 'guardrail']);

/**
 * Which spans are steps (§8.4, §11.2): every span of a kind other than generic; the root when it
 * is a generic span of some convention (a LangGraph or chain root is the agent run); evaluator
 * spans as generic steps without their children. Other generic spans (graph nodes, edges,
 * sequences, tasks, HTTP and database client spans) are containers and never steps, unless they
 * failed and no step shows that failure.
 */
function selectSteps(nodes: readonly SpanNode[], root: SpanNode | undefined): StepDraft[] {
  const excluded = new Set<SpanNode>();
  for (const n of nodes) {
    if (n.reading.evaluator) for (const d of descendants(n)) excluded.add(d);
  }
  const steps = new Map<SpanNode, StepDraft>();
  for (const n of nodes) {
    if (excluded.has(n)) continue;
    const r = n.reading;
    if (r.evaluator) steps.set(n, draft(n, 'generic'));
    else if (r.type !== 'generic') steps.set(n, draft(n, r.type));
    else if (n === root && r.conventions.length > 0) steps.set(n, draft(n, 'agent'));
  }
  collapseModelCalls(steps);
  collapseToolCalls(steps);
  for (const n of nodes) {
    // Only plain spans: a model or tool span folded into another step lent it its error already.
    if (excluded.has(n) || steps.has(n) || !n.reading.failed || n.reading.type !== 'generic') {
      continue;
    }
    let insideLeaf = false;
    for (let up = n.parent; up && !insideLeaf; up = up.parent) {
      const s = steps.get(up);
      if (s && LEAF_TYPES.has(s.type)) insideLeaf = true;
    }
    if (insideLeaf) continue;
    const shown = descendants(n).some((d) => (steps.get(d)?.error ?? '') !== '');
    if (!shown) steps.set(n, draft(n, 'generic'));
  }
  return [...steps.values()];
}

/** The steps of a given type above a node, nearest first (one walk up the tree). */
function ancestorsOfType(
  node: SpanNode,
  steps: Map<SpanNode, StepDraft>,
  type: StepType,
): StepDraft[] {
  const out: StepDraft[] = [];
  for (let up = node.parent; up; up = up.parent) {
    const s = steps.get(up);
    if (s?.type === type) out.push(s);
  }
  return out;
}

/** The nearest step of a given type above a node that `accept` accepts. */
function nearestOfType(
  node: SpanNode,
  steps: Map<SpanNode, StepDraft>,
  type: StepType,
  accept?: (s: StepDraft) => boolean,
): StepDraft | undefined {
  for (let up = node.parent; up; up = up.parent) {
    const s = steps.get(up);
    if (s?.type === type && (accept === undefined || accept(s))) return s;
  }
  return undefined;
}

/** §11.3: an llm step wrapping llm steps is the same call seen twice; keep the innermost. */
function collapseModelCalls(steps: Map<SpanNode, StepDraft>): void {
  const llm = [...steps.values()].filter((s) => s.type === 'llm');
  // Most traces have no model call inside another: nothing to collapse, nothing to gather.
  if (!llm.some((s) => nearestOfType(s.node, steps, 'llm') !== undefined)) return;
  const above = new Map(llm.map((s) => [s, ancestorsOfType(s.node, steps, 'llm')]));
  const outers = new Set([...above.values()].flat());
  // For each wrapper: how many innermost calls it holds, and which.
  const leaves = new Map<StepDraft, StepDraft[]>();
  for (const s of llm) {
    if (outers.has(s)) continue;
    for (const a of above.get(s) ?? []) leaves.set(a, [...(leaves.get(a) ?? []), s]);
  }
  // Nearest wrappers first, so the closest outer span fills the inner step's gaps first.
  const ordered = [...outers].sort((a, b) => b.node.depth - a.node.depth);
  for (const outer of ordered) {
    steps.delete(outer.node);
    const inner = leaves.get(outer) ?? [];
    if (inner.length !== 1) continue;
    const keep = inner[0] as StepDraft;
    keep.input ??= outer.input;
    keep.output ??= outer.output;
    // The model that answered wins over the one asked for, whichever span knows it.
    if (keep.model === undefined || (!keep.modelServed && outer.modelServed)) {
      keep.model = outer.model;
      keep.modelServed = outer.modelServed;
    }
    if (outer.usage) keep.usage = { ...outer.usage, ...keep.usage };
    if (!keep.error) keep.error = outer.error;
  }
}

/** §11.4: nested tool spans with the same name or call id are one call; keep the outer. */
function collapseToolCalls(steps: Map<SpanNode, StepDraft>): void {
  const tools = [...steps.values()].filter((s) => s.type === 'tool');
  // Deepest first: each merges into its nearest matching tool ancestor, which merges upward later.
  tools.sort((a, b) => b.node.depth - a.node.depth);
  for (const inner of tools) {
    const outer = nearestOfType(
      inner.node,
      steps,
      'tool',
      (a) =>
        (!!a.toolCallId && a.toolCallId === inner.toolCallId) ||
        (!!a.toolName && a.toolName === inner.toolName),
    );
    if (!outer) continue;
    steps.delete(inner.node);
    outer.toolName ??= inner.toolName;
    outer.toolCallId ??= inner.toolCallId;
    outer.toolArguments ??= inner.toolArguments;
    if (!outer.toolResultPresent && inner.toolResultPresent) {
      outer.toolResult = inner.toolResult;
      outer.toolResultPresent = true;
    }
    if (!outer.error) outer.error = inner.error;
  }
}

/** §11.5 (with ancestors before descendants on equal starts): start, depth, end, span id. */
function order(steps: StepDraft[]): StepDraft[] {
  return steps.sort(
    (a, b) =>
      compareNanos(a.node.start, b.node.start) ||
      a.node.depth - b.node.depth ||
      compareNanos(a.node.end, b.node.end) ||
      a.node.span.spanId.localeCompare(b.node.span.spanId),
  );
}

function jsonEqual(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

function parsedArgs(text: string | undefined): { ok: boolean; value?: unknown } {
  if (text === undefined) return { ok: false };
  const parsed = tryParse(text.trim());
  return parsed.ok ? { ok: true, value: parsed.value } : { ok: false };
}

/**
 * §11.7 and §10.2 tool fallback: link each tool step to a tool call of the nearest preceding llm
 * step (by id, else by name in order, else by equal arguments for unnamed tools), then fill what
 * the tool span lacks: id, name (MLflow's GenAI export drops it), arguments, and the result from
 * the matching tool message of a later llm step. Tool-span arguments that are not a JSON object
 * or list (LangChain's coerced input: a bare value or a Python repr) give way to the model's.
 */
function linkTools(steps: StepDraft[]): void {
  const used = new Set<ToolCall>();
  for (let i = 0; i < steps.length; i++) {
    const tool = steps[i] as StepDraft;
    if (tool.type !== 'tool') continue;
    let call: ToolCall | undefined;
    for (let j = i - 1; j >= 0 && !call; j--) {
      const llm = steps[j] as StepDraft;
      if (llm.type !== 'llm') continue;
      const calls = unusedCallsOf(llm.output, used);
      if (calls.length === 0) continue;
      call = matchCall(tool, calls);
      // Only the nearest llm step with tool calls answers for calls without an id.
      if (!call && !tool.toolCallId) break;
    }
    if (call) {
      used.add(call);
      tool.toolCallId ??= call.id;
      tool.toolName ??= call.name;
      tool.toolArguments = repairedArguments(tool.toolArguments, call.arguments);
    }
    if (!tool.toolResultPresent && tool.toolCallId) {
      const result = resultFromLaterCall(steps, i, tool.toolCallId);
      if (result.found) {
        tool.toolResult = result.value;
        tool.toolResultPresent = true;
      }
    }
  }
}

/** The tool calls of a model call's output messages not yet linked to a tool step. */
function unusedCallsOf(output: unknown, used: ReadonlySet<ToolCall>): ToolCall[] {
  const out: ToolCall[] = [];
  if (!Array.isArray(output)) return out;
  for (const m of output as Message[]) {
    if (!m || !Array.isArray(m.toolCalls)) continue;
    for (const c of m.toolCalls) if (!used.has(c)) out.push(c);
  }
  return out;
}

function matchCall(tool: StepDraft, calls: ToolCall[]): ToolCall | undefined {
  if (tool.toolCallId) return calls.find((c) => c.id === tool.toolCallId);
  if (tool.toolName) return calls.find((c) => c.name === tool.toolName);
  const args = parsedArgs(tool.toolArguments);
  if (!args.ok) return undefined;
  return calls.find((c) => {
    const other = parsedArgs(c.arguments);
    return other.ok && jsonEqual(other.value, args.value);
  });
}

function repairedArguments(own: string | undefined, model: string): string | undefined {
  if (own === undefined) return model || undefined;
  const parsed = parsedArgs(own);
  if (parsed.ok && typeof parsed.value === 'object' && parsed.value !== null) return own;
  if (!model) return own;
  // Not an argument object: LangChain's coerced tool input (`Paris` for a one-argument tool, or
  // the Python repr `{'city': 'Paris'}`). The model's own arguments are the call's raw arguments.
  return model;
}

function resultFromLaterCall(
  steps: StepDraft[],
  from: number,
  id: string,
): { found: boolean; value?: unknown } {
  for (let j = from + 1; j < steps.length; j++) {
    const s = steps[j] as StepDraft;
    if (s.type !== 'llm' || !Array.isArray(s.input)) continue;
    const m = (s.input as Message[]).find((x) => x?.role === 'tool' && x.toolCallId === id);
    if (m) return { found: true, value: m.content };
  }
  return { found: false };
}

/** The nearest ancestor that is a step; a parent outside the trace is kept as it is. */
function stepParent(node: SpanNode, stepNodes: Set<SpanNode>): string | undefined {
  let n = node;
  while (n.parent) {
    if (stepNodes.has(n.parent)) return n.parent.span.spanId;
    n = n.parent;
  }
  return n.span.parentSpanId || undefined;
}

/** The final Step objects, RecordSchema-valid. */
export function toSteps(drafts: StepDraft[]): Step[] {
  const stepNodes = new Set(drafts.map((d) => d.node));
  return drafts.map((d) => {
    const span = d.node.span;
    const step: Step = { type: d.type, name: d.name, error: d.error };
    if (d.type === 'tool') {
      if (d.toolName) step.name = d.toolName;
      const args = rawArguments(d.toolArguments);
      if (args !== undefined) step.input = args;
      if (d.toolResultPresent) step.output = d.toolResult ?? null;
    } else {
      if (d.input !== undefined) step.input = d.input;
      if (d.output !== undefined) step.output = d.output;
    }
    if (d.model) step.model = d.model;
    const start = isoOf(span.startTimeUnixNano);
    const end = isoOf(span.endTimeUnixNano);
    if (start) step.start = start;
    if (end) step.end = end;
    if (d.usage && Object.keys(d.usage).length > 0) step.usage = d.usage;
    step.spanId = span.spanId;
    const parent = stepParent(d.node, stepNodes);
    if (parent) step.parentSpanId = parent;
    step.attributes = jsonSafeAttributes(span.attributes);
    const dropped = droppedOf(span);
    if (dropped !== undefined) step.dropped = dropped;
    return step;
  });
}

/** What a span lost to dropped counts (its sender's and the ingest limits'); undefined: nothing. */
export function droppedOf(span: Span): Dropped | undefined {
  let out: Dropped | undefined;
  const add = (field: keyof Dropped, n: number | undefined) => {
    if (n === undefined || n <= 0) return;
    out ??= {};
    out[field] = (out[field] ?? 0) + n;
  };
  add('attributes', span.droppedAttributesCount);
  add('events', span.droppedEventsCount);
  add('links', span.droppedLinksCount);
  for (const e of span.events) add('eventAttributes', e.droppedAttributesCount);
  for (const l of span.links) add('linkAttributes', l.droppedAttributesCount);
  return out;
}

/** Tree, root, and ordered step drafts of one trace's spans. */
export function buildTrace(spans: readonly Span[]): TraceTree {
  const nodes = buildTree(spans);
  for (const node of nodes) node.reading = readSpan(node.span, node);
  const root = pickRoot(nodes);
  const steps = order(selectSteps(nodes, root));
  linkTools(steps);
  return { nodes, root, steps };
}
