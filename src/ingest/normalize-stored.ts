import {
  type Attributes,
  type AttributeValue,
  holdsBytes,
  type NormalizedTrace,
  type Span,
  type TraceRoot,
} from '../core/index.js';
import type { PendingTrace } from '../store/index.js';
import { normalizeTrace } from './conventions/index.js';

/**
 * Normalizes a stored trace and applies the labels of its ingest door (API key, source), which
 * win over `touchstone.label.*` attributes of the same key.
 */
export function normalizeStoredTrace(spans: Span[], pending: PendingTrace): NormalizedTrace {
  const normalized = normalizeTrace(spans, { project: pending.project });
  const labels = { ...normalized.summary.labels, ...pending.labels };
  const root = rootOf(spans);
  return {
    record: { ...normalized.record, labels },
    summary: { ...normalized.summary, labels },
    ...(root === undefined ? {} : { root }),
  };
}

/** Bytes as base64 text, so the root survives its JSON column (a copy only when it holds bytes). */
function jsonSafe(attributes: Attributes): Attributes {
  if (!holdsBytes(attributes)) return attributes;
  const fix = (v: AttributeValue): AttributeValue => {
    if (v instanceof Uint8Array) return Buffer.from(v).toString('base64');
    if (Array.isArray(v)) return v.map(fix);
    if (typeof v === 'object' && v !== null) {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fix(x)]));
    }
    return v;
  };
  return fix(attributes) as Attributes;
}

/** The root span's attributes and resource (the earliest span when no span is a root). */
function rootOf(spans: readonly Span[]): TraceRoot | undefined {
  const roots = spans.filter((s) => s.parentSpanId === '');
  let root: Span | undefined;
  for (const s of roots.length > 0 ? roots : spans) {
    if (root === undefined || BigInt(s.startTimeUnixNano) < BigInt(root.startTimeUnixNano))
      root = s;
  }
  if (root === undefined) return undefined;
  return { attributes: jsonSafe(root.attributes), resource: jsonSafe(root.resource) };
}
