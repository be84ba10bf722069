/**
 * Facts: the variables a trace gives an expression (`traceFacts`), and the CEL values they are
 * bound as, each converted on first read.
 */
import { type CelInput, celList, celMap } from '@bufbuild/cel';
import type { EvalRecord, TraceRoot, TraceSummary } from '../core/index.js';
import {
  type AccessFacts,
  INT64_MAX,
  INT64_MIN,
  type OverrideInputs,
  type TraceFacts,
} from './types.js';

/** What `traceFacts` reads from a stored trace. */
export type TraceFactsSummary = Pick<
  TraceSummary,
  'service' | 'name' | 'durationMs' | 'error' | 'steps' | 'labels'
> & { readonly project: string; readonly source: string };

export function traceFacts(
  trace: TraceFactsSummary,
  record: EvalRecord,
  root?: TraceRoot,
): TraceFacts {
  const tools: string[] = [];
  const models = new Set<string>();
  for (const step of record.trajectory ?? []) {
    if (step.type === 'tool') tools.push(step.name);
    else if (step.type === 'llm' && step.model !== undefined && step.model !== '') {
      models.add(step.model);
    }
  }
  const facts: TraceFacts = {
    service: trace.service,
    name: trace.name,
    duration: trace.durationMs / 1000,
    error: trace.error,
    steps: trace.steps,
    tools,
    models: [...models],
    attributes: root?.attributes ?? {},
    resource: root?.resource ?? {},
    labels: trace.labels,
    project: trace.project,
    source: trace.source,
  };
  // Carried by the facts rather than kept in a WeakMap: one per trace, and WeakMap entries for
  // short-lived keys cost more in garbage collection than the evaluations they serve.
  Object.defineProperty(facts, BINDINGS, { value: new FactBindings(facts) });
  return Object.freeze(facts);
}
export type Bindings = Record<string, CelInput>;

const MAX_VALUE_DEPTH = 32;

/**
 * The variables as CEL values, each converted on first read: a selector reading only `labels`
 * never pays for the attributes. One per facts object, shared by every expression.
 */
class FactBindings {
  #attributes: CelInput | undefined;
  #resource: CelInput | undefined;
  #labels: CelInput | undefined;
  #tools: CelInput | undefined;
  #models: CelInput | undefined;

  #scoresSource: object | undefined;
  #scores: CelInput | undefined;

  #input: string | undefined;
  #output: string | undefined;

  constructor(private readonly f: TraceFacts) {}

  /**
   * Sets what `scores` reads for the next evaluation (evaluation is synchronous). Stages of one
   * trace pass the same object in turn, so it is converted once.
   */
  useScores(scores: Readonly<Record<string, number>>): void {
    if (this.#scoresSource === scores && this.#scores !== undefined) return;
    const map = new Map<string, number>();
    for (const [k, v] of Object.entries(scores)) if (typeof v === 'number') map.set(k, v);
    this.#scores = celMap(map);
    this.#scoresSource = scores;
  }

  /** Sets what `input` and `output` read for the next evaluation, as `useScores` does. */
  useText(text: OverrideInputs): void {
    this.#input = text.input;
    this.#output = text.output;
  }

  /** Undefined for selectors, which the check keeps from reading it. */
  get scores(): CelInput | undefined {
    return this.#scores;
  }
  /** Undefined for selectors and `when`, which the check keeps from reading them. */
  get input(): string | undefined {
    return this.#input;
  }
  get output(): string | undefined {
    return this.#output;
  }
  get service(): string {
    return String(this.f.service);
  }
  get name(): string {
    return String(this.f.name);
  }
  get duration(): number {
    return Number(this.f.duration);
  }
  get error(): boolean {
    return this.f.error === true;
  }
  get steps(): bigint {
    return Number.isFinite(this.f.steps) ? BigInt(Math.trunc(this.f.steps)) : 0n;
  }
  get project(): string {
    return String(this.f.project);
  }
  get source(): string {
    return String(this.f.source);
  }
  get tools(): CelInput {
    this.#tools ??= celList(this.f.tools.filter((t) => typeof t === 'string'));
    return this.#tools;
  }
  get models(): CelInput {
    this.#models ??= celList(this.f.models.filter((t) => typeof t === 'string'));
    return this.#models;
  }
  get attributes(): CelInput {
    this.#attributes ??= toCelMap(this.f.attributes, 0);
    return this.#attributes;
  }
  get resource(): CelInput {
    this.#resource ??= toCelMap(this.f.resource, 0);
    return this.#resource;
  }
  get labels(): CelInput {
    this.#labels ??= toCelMap(this.f.labels, 0);
    return this.#labels;
  }
}

const BINDINGS = Symbol('cel.bindings');

/** Facts built without `traceFacts` (tests, callers spreading facts) get theirs here. */
const foreignBindings = new WeakMap<object, FactBindings>();

export function bindingsFor(
  facts: TraceFacts,
  scores: Readonly<Record<string, number>> | undefined,
  text?: OverrideInputs,
): Bindings {
  let base = (facts as { [BINDINGS]?: FactBindings })[BINDINGS];
  if (base === undefined) {
    base = foreignBindings.get(facts);
    if (base === undefined) {
      base = new FactBindings(facts);
      foreignBindings.set(facts, base);
    }
  }
  if (scores !== undefined) base.useScores(scores);
  if (text !== undefined) base.useText(text);
  return base as unknown as Bindings;
}

const accessBound = new WeakMap<AccessFacts, Bindings>();

/**
 * An access rule's variables, converted as attribute values are: once per facts object, which
 * every rule of one call shares.
 */
export function accessBindings(facts: AccessFacts): Bindings {
  let bound = accessBound.get(facts);
  if (bound === undefined) {
    bound = {
      principal: toCelMap(facts.principal, 0),
      action: String(facts.action),
      resource: toCelMap(facts.resource, 0),
      mcp: toCelMap(facts.mcp, 0),
    };
    accessBound.set(facts, bound);
  }
  return bound;
}

function toCelMap(obj: object, depth: number) {
  const map = new Map<string, CelInput>();
  for (const [k, v] of Object.entries(obj)) {
    const c = toCelValue(v, depth + 1);
    if (c !== undefined) map.set(k, c);
  }
  return celMap(map);
}

/**
 * Attribute values as CEL sees them: numbers are doubles (OTLP ints and doubles both arrive as
 * numbers), bigints ints, kvlists maps, arrays lists; anything else is left out.
 */
function toCelValue(v: unknown, depth: number): CelInput | undefined {
  switch (typeof v) {
    case 'string':
    case 'boolean':
    case 'number':
      return v;
    case 'bigint':
      return v >= INT64_MIN && v <= INT64_MAX ? v : Number(v);
    case 'object': {
      if (v === null) return null;
      if (v instanceof Uint8Array) return v;
      if (depth > MAX_VALUE_DEPTH) return undefined;
      if (Array.isArray(v)) {
        const out: CelInput[] = [];
        for (const el of v) {
          const c = toCelValue(el, depth + 1);
          if (c !== undefined) out.push(c);
        }
        return celList(out);
      }
      return toCelMap(v, depth);
    }
    default:
      return undefined;
  }
}
