import type { Attributes, Span } from '../core/index.js';
import type { TraceHeader } from './connector.js';

/**
 * The store's trace-level attributes go on every span's resource (tags, metadata). Spans that
 * shared a resource object (connectors give every span of a trace the same one) share the merged
 * one too: redaction, labels and storage then handle it once instead of once per span.
 */
export function withResource(spans: Span[], resource: TraceHeader['resource']): Span[] {
  if (Object.keys(resource).length === 0) return spans;
  const merged = new Map<Attributes, Attributes>();
  return spans.map((s) => {
    let one = merged.get(s.resource);
    if (one === undefined) {
      one = { ...s.resource, ...resource };
      merged.set(s.resource, one);
    }
    return { ...s, resource: one };
  });
}
