import { describe, expect, it } from 'vitest';
import { type Attributes, type Span, STEP_TYPES } from '../../core/index.js';
import { fixtureNames, fixtureSpans } from './golden.testkit.js';
import type { ConventionReader, SpanContext } from './reader.js';
import { declares, READERS, readersOf } from './readers.js';
import { span as makeSpan } from './spans.testkit.js';

/**
 * Normalization asks a reader about a span only when the span carries a key the reader declares
 * (`ConventionReader.reads`). These tests hold the declarations to the readers: over the recorded
 * fixtures (and a span holding every declared key), every attribute any method of any reader reads
 * is declared, and a reader given a span without its keys answers nothing.
 */

/** Every method of a reader, every step type where one is asked for; their answers in order. */
function askAll(reader: ConventionReader, span: Span): unknown[] {
  const ctx: SpanContext = { isRoot: span.parentSpanId === '', descendants: () => [] };
  const out: unknown[] = [
    reader.detect(span),
    reader.stepType?.(span, ctx),
    reader.impliedType?.(span),
    reader.model?.(span),
    reader.messages?.(span),
    reader.toolCall?.(span),
    reader.traceIo?.(span),
    reader.usage?.(span),
    reader.error?.(span),
    reader.session?.(span),
    reader.user?.(span),
    reader.labels?.(span),
  ];
  for (const type of STEP_TYPES) out.push(reader.stepName?.(span, type), reader.io?.(span, type));
  return out;
}

/** The attribute keys a reader reads from a span (values got, or presence tested). */
function keysRead(reader: ConventionReader, span: Span): Set<string> {
  const read = new Set<string>();
  const attributes = new Proxy(span.attributes, {
    get(target, key, receiver) {
      if (typeof key === 'string') read.add(key);
      return Reflect.get(target, key, receiver);
    },
    has(target, key) {
      if (typeof key === 'string') read.add(key);
      return Reflect.has(target, key);
    },
  });
  askAll(reader, { ...span, attributes });
  return read;
}

function corpus(): Span[] {
  return fixtureNames().flatMap((name) => fixtureSpans(name));
}

/** A span holding every exact key any reader declares (JSON text, so parsing branches run). */
function everyKeySpan(): Span {
  const attrs: Attributes = {};
  for (const r of READERS) {
    for (const key of r.reads.keys) attrs[key] = '{"model":"m","input":"q","usage":{}}';
    for (const prefix of r.reads.prefixes) attrs[`${prefix}0.content`] = 'text';
  }
  return makeSpan('Function: every key', { start: 0, end: 1, attrs });
}

const NOTHING = (v: unknown) =>
  v === undefined ||
  v === false ||
  (typeof v === 'object' && v !== null && Object.keys(v).length === 0);

describe('reader key declarations', () => {
  const spans = [...corpus(), everyKeySpan()];

  it('cover the recorded fixtures', () => {
    expect(spans.length).toBeGreaterThan(100);
  });

  it('name every attribute each reader reads', () => {
    const undeclared: string[] = [];
    for (const span of spans) {
      for (const r of READERS) {
        for (const key of keysRead(r, span)) {
          if (!declares(r, key)) undeclared.push(`${r.name}: ${key}`);
        }
      }
    }
    expect([...new Set(undeclared)].sort()).toEqual([]);
  });

  it('leave a reader nothing to say about a span without its keys', () => {
    const spoke: string[] = [];
    for (const span of spans) {
      for (const r of READERS) {
        const attributes: Attributes = {};
        for (const key in span.attributes) {
          if (!declares(r, key)) attributes[key] = span.attributes[key] as Attributes[string];
        }
        const bare = { ...span, attributes };
        if (r.reads.without?.(bare)) continue;
        const answers = askAll(r, bare);
        if (!answers.every(NOTHING)) spoke.push(`${r.name} on ${span.name}`);
      }
    }
    expect([...new Set(spoke)]).toEqual([]);
  });

  it('ask every reader whose key a span carries, and only those', () => {
    const s = makeSpan('chat', {
      start: 0,
      end: 1,
      attrs: { 'gen_ai.request.model': 'm', 'session.id': 's', 'http.method': 'GET' },
    });
    const asked = READERS.filter((_, i) => (readersOf(s) & (1 << i)) !== 0).map((r) => r.name);
    // OpenInference's session id is read by Langfuse and MLflow too.
    expect(asked).toEqual(['gen-ai', 'openinference', 'mlflow', 'langfuse']);
    const bySpanName = makeSpan('Function: lookup', { start: 0, end: 1 });
    expect(READERS.filter((_, i) => (readersOf(bySpanName) & (1 << i)) !== 0)).toEqual([
      READERS.find((r) => r.name === 'logfire'),
    ]);
  });
});
