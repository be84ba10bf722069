import { createHash } from 'node:crypto';
import type { Attributes, AttributeValue, Span, SpanEvent, Step } from '../../core/index.js';

/**
 * Hand-written spans for the per-convention tests, mirroring the examples of the conventions
 * reference (the travel-helper scenario, §0.3: times in ms after the root's start).
 */

export const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const BASE_MS = 1_767_225_600_000n; // 2026-01-01T00:00:00Z

/** A stable 16-hex span id for a label. */
export function sid(label: string): string {
  return createHash('sha1').update(label).digest('hex').slice(0, 16);
}

export function ns(ms: number): string {
  return (
    (BASE_MS + BigInt(Math.floor(ms))) * 1_000_000n +
    BigInt(Math.round((ms % 1) * 1e6))
  ).toString();
}

export interface SpanSpec {
  /** Label turned into the span id; defaults to the name. */
  id?: string;
  /** Parent label, or none for a root. */
  parent?: string;
  kind?: number;
  start: number;
  end: number;
  attrs?: Attributes;
  events?: Array<{ name: string; at?: number; attrs: Attributes }>;
  status?: { code: 0 | 1 | 2; message?: string };
  resource?: Attributes;
  scope?: string;
}

export function span(name: string, spec: SpanSpec): Span {
  const events: SpanEvent[] = (spec.events ?? []).map((e) => ({
    name: e.name,
    timeUnixNano: ns(e.at ?? spec.start),
    attributes: e.attrs,
  }));
  return {
    traceId: TRACE_ID,
    spanId: sid(spec.id ?? name),
    parentSpanId: spec.parent ? sid(spec.parent) : '',
    name,
    kind: spec.kind ?? 1,
    startTimeUnixNano: ns(spec.start),
    endTimeUnixNano: ns(spec.end),
    attributes: spec.attrs ?? {},
    events,
    links: [],
    status: { code: spec.status?.code ?? 0, message: spec.status?.message ?? '' },
    resource: spec.resource ?? { 'service.name': 'travel-app' },
    scope: { name: spec.scope ?? '', version: '' },
  };
}

/** JSON text of a value, as `⟨json⟩` attributes arrive. */
export function json(value: unknown): string {
  return JSON.stringify(value);
}

/** MLflow's encoding: every value JSON-encoded, plain strings included. */
export function mlflowValue(value: unknown): string {
  return JSON.stringify(value);
}

/** A step reduced to its stable fields (no times, ids or raw attributes). */
export function stable(step: Step): Record<string, unknown> {
  const out: Record<string, unknown> = { type: step.type, name: step.name };
  if (step.model !== undefined) out.model = step.model;
  if (step.input !== undefined) out.input = step.input;
  if (step.output !== undefined) out.output = step.output;
  if (step.usage !== undefined) {
    const { latencyMs: _, ...usage } = step.usage;
    if (Object.keys(usage).length > 0) out.usage = usage;
  }
  if (step.error) out.error = step.error;
  return out;
}

export function shuffled<T>(list: readonly T[]): T[] {
  // Deterministic: reverse, then rotate by one, so no test depends on arrival order.
  const r = [...list].reverse();
  const head = r.shift();
  return head === undefined ? r : [...r, head];
}

export type { AttributeValue };

/** The scenario's messages in the Record's form (conventions reference §0.3). */
export const SYSTEM = { role: 'system', content: 'You are a travel helper.' };
export const QUESTION = 'Weather and local time in Paris?';
export const ANSWER = 'Paris: 18°C and sunny, local time 14:05.';
export const USER = { role: 'user', content: QUESTION };
export const CALLS = {
  role: 'assistant',
  toolCalls: [
    { id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { id: 'call_t1', name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
  ],
};
export const FINAL = { role: 'assistant', content: ANSWER };
