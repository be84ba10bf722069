import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  attachDetachedEvents,
  type Message,
  type NormalizedTrace,
  type Span,
  type Step,
} from '../../core/index.js';
import { decodeOtlpLogsProtobuf, decodeOtlpProtobuf } from '../otlp/index.js';
import type { LogEvent } from '../types.js';
import { normalizeTrace } from './index.js';

/**
 * Golden tests over traces recorded from the real instrumentation libraries
 * (test/fixtures/otlp/, see its README): decode each fixture's `<name>.N.pb` requests, group the
 * spans by trace, normalize, and reduce the result to the fields that do not change between two
 * captures of one scenario (no times, span or trace ids, tool call ids or raw attributes).
 * Shared by golden.test.ts and test/fixtures/otlp/golden/update.ts.
 */

export const FIXTURES_DIR = fileURLToPath(new URL('../../../test/fixtures/otlp', import.meta.url));
export const GOLDEN_DIR = join(FIXTURES_DIR, 'golden');

/** The server's default attribute cap (`traces.max_attribute_bytes`), as ingest applies it. */
const MAX_ATTRIBUTE_BYTES = 64 * 1024;

const REQUEST_FILE = /^(.+)\.(\d+)\.pb$/;

/** Fixture names with at least one trace request file (`<name>.N.pb`, logs excluded). */
export function fixtureNames(): string[] {
  if (!existsSync(FIXTURES_DIR)) return [];
  const names = new Set<string>();
  for (const file of readdirSync(FIXTURES_DIR)) {
    const m = REQUEST_FILE.exec(file);
    if (m && !m[1]?.endsWith('.logs')) names.add(m[1] as string);
  }
  return [...names].sort();
}

/** The request bodies `<prefix>.N.pb` of a fixture, in request order. */
function requestBodies(prefix: string): Uint8Array[] {
  return readdirSync(FIXTURES_DIR)
    .map((f) => ({ f, m: REQUEST_FILE.exec(f) }))
    .filter(({ m }) => m?.[1] === prefix)
    .sort((a, b) => Number(a.m?.[2]) - Number(b.m?.[2]))
    .map(({ f }) => new Uint8Array(readFileSync(join(FIXTURES_DIR, f))));
}

/** Log events joined to their spans, as the store does when it reads a trace. */
export function withLogEvents(spans: Span[], events: readonly LogEvent[]): Span[] {
  return attachDetachedEvents(
    spans,
    events.map((e) => ({ spanId: e.spanId, events: [e.event] })),
  );
}

/**
 * Spans of every trace request of a fixture, in request order, with the GenAI events of its log
 * requests (`<name>.logs.N.pb`) joined to them.
 */
export function fixtureSpans(name: string): Span[] {
  const options = { maxAttributeBytes: MAX_ATTRIBUTE_BYTES };
  const spans = requestBodies(name).flatMap((b) => decodeOtlpProtobuf(b, options).spans);
  const events = requestBodies(`${name}.logs`).flatMap(
    (b) => decodeOtlpLogsProtobuf(b, options).events,
  );
  return withLogEvents(spans, events);
}

/** Normalized traces of a fixture, ordered by their start time. */
export function fixtureTraces(name: string): NormalizedTrace[] {
  const byTrace = new Map<string, Span[]>();
  for (const span of fixtureSpans(name)) {
    const list = byTrace.get(span.traceId) ?? [];
    list.push(span);
    byTrace.set(span.traceId, list);
  }
  return [...byTrace.values()]
    .map((spans) => normalizeTrace(spans))
    .sort((a, b) => a.summary.startTime.localeCompare(b.summary.startTime));
}

function reduceMessage(m: Message): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role };
  if (m.content !== undefined) out.content = m.content;
  if (m.toolCalls)
    out.toolCalls = m.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }));
  return out;
}

/** Message lists reduced to roles, contents and tool calls; other values as they are. */
export function reduceContent(value: unknown): unknown {
  if (Array.isArray(value) && value.every((m) => typeof m?.role === 'string')) {
    return (value as Message[]).map(reduceMessage);
  }
  return value;
}

export function reduceStep(step: Step): Record<string, unknown> {
  const out: Record<string, unknown> = { type: step.type, name: step.name };
  if (step.model !== undefined) out.model = step.model;
  if (step.type === 'tool') {
    if (step.input !== undefined) out.arguments = step.input;
    if (step.output !== undefined) out.result = step.output;
  } else {
    if (step.input !== undefined) out.input = reduceContent(step.input);
    if (step.output !== undefined) out.output = reduceContent(step.output);
  }
  if (step.usage) {
    const { latencyMs: _, ...tokens } = step.usage;
    if (Object.keys(tokens).length > 0) out.usage = tokens;
  }
  if (step.error) out.error = step.error;
  return out;
}

export interface GoldenTrace {
  name: string;
  service: string;
  error: boolean;
  input?: unknown;
  output?: unknown;
  usage?: Record<string, number>;
  labels?: Record<string, string>;
  sessionId?: unknown;
  steps?: Record<string, unknown>[];
}

export function reduceTrace(t: NormalizedTrace): GoldenTrace {
  const { latencyMs: _, ...usage } = t.record.usage ?? {};
  const out: GoldenTrace = {
    name: t.summary.name,
    service: t.summary.service,
    error: t.summary.error,
  };
  if (t.record.input !== undefined) out.input = reduceContent(t.record.input);
  if (t.record.output !== undefined) out.output = reduceContent(t.record.output);
  out.usage = usage as Record<string, number>;
  out.labels = t.record.labels ?? {};
  if (t.record.metadata?.sessionId !== undefined) out.sessionId = t.record.metadata.sessionId;
  out.steps = (t.record.trajectory ?? []).map(reduceStep);
  return out;
}

export function goldenPath(name: string): string {
  return join(GOLDEN_DIR, `${name}.trajectory.json`);
}

/** The golden document of a fixture as the normalizer produces it now. */
export function goldenOf(name: string): { fixture: string; traces: GoldenTrace[] } {
  return { fixture: name, traces: fixtureTraces(name).map(reduceTrace) };
}
