/**
 * Ingest limits (`traces.limits`, docs/ingest.md), applied to every span before redaction, pushed
 * or pulled, so that no later pass (redaction, conventions, labels, storage) meets a key, a name
 * or a list of unbounded size:
 * - an attribute key (at any depth, resource attributes included) or a name (span, event, scope
 *   name and version) longer than its cap keeps its longest prefix that fits, on a character
 *   boundary, followed by the marker of cut attribute values (`…[truncated N bytes]`);
 * - as in OpenTelemetry SDKs, a span keeps its first `max_events_per_span` events and
 *   `max_links_per_span` links, and a span, event or link its first `max_attributes_per_*`
 *   attributes; the rest are dropped and counted in its `dropped*Count`, added to what the sender
 *   reported. Resource attributes have no count limit (the OpenTelemetry spec exempts them).
 * One pass, linear in the size of the spans; nothing is ever refused. Copy on write: a span within
 * every limit is returned as it is, and so is the list when no span changed.
 */
import { type Config, DEFAULTS } from '../config/index.js';
import type {
  Attributes,
  AttributeValue,
  InstrumentationScope,
  Span,
  SpanEvent,
  SpanLink,
} from '../core/index.js';
import { setAttribute } from './otlp/attributes.js';
import { capString } from './otlp/truncate.js';
import type { SpanCountLimits } from './types.js';

export interface SpanLimits extends SpanCountLimits {
  /** Longest attribute key kept whole, in UTF-8 bytes. */
  maxAttributeKeyBytes: number;
  /** Longest span, event or scope name (and scope version) kept whole, in UTF-8 bytes. */
  maxNameBytes: number;
}

export const DEFAULT_SPAN_LIMITS: SpanLimits = DEFAULTS.traces.limits;

/** `traces.limits` as the pipeline takes it. */
export function spanLimitsFromConfig(limits: Config['traces']['limits']): SpanLimits {
  return {
    maxAttributeKeyBytes: limits.max_attribute_key_bytes,
    maxNameBytes: limits.max_name_bytes,
    maxAttributesPerSpan: limits.max_attributes_per_span,
    maxEventsPerSpan: limits.max_events_per_span,
    maxLinksPerSpan: limits.max_links_per_span,
    maxAttributesPerEvent: limits.max_attributes_per_event,
    maxAttributesPerLink: limits.max_attributes_per_link,
  };
}

/** Nested values deeper than this keep their keys as they are (redaction replaces them whole). */
const MAX_DEPTH = 64;

/** The spans within `limits`: the same array when every span already was. */
export function limitSpans(spans: Span[], limits: SpanLimits): Span[] {
  const limiter = new Limiter(limits);
  let out: Span[] | undefined;
  for (let i = 0; i < spans.length; i++) {
    const span = spans[i]!;
    const limited = limiter.span(span);
    if (limited !== span) {
      out ??= spans.slice();
      out[i] = limited;
    }
  }
  return out ?? spans;
}

class Limiter {
  /** Each distinct resource and scope object is limited once and the result shared again. */
  private readonly resources = new Map<Attributes, Attributes>();
  private readonly scopes = new Map<InstrumentationScope, InstrumentationScope>();
  /** Attributes the last `attributes` call dropped. */
  private dropped = 0;

  constructor(private readonly limits: SpanLimits) {}

  span(span: Span): Span {
    const name = capString(span.name, this.limits.maxNameBytes);
    const resource = this.resource(span.resource);
    const scope = this.scope(span.scope);
    const attributes = this.attributes(span.attributes, this.limits.maxAttributesPerSpan);
    const droppedAttributes = this.dropped;
    const events = this.list(span.events, this.limits.maxEventsPerSpan, (e) => this.event(e));
    const droppedEvents = span.events.length - events.length;
    const links = this.list(span.links, this.limits.maxLinksPerSpan, (l) => this.link(l));
    const droppedLinks = span.links.length - links.length;
    if (
      name === span.name &&
      resource === span.resource &&
      scope === span.scope &&
      attributes === span.attributes &&
      events === span.events &&
      links === span.links
    ) {
      return span;
    }
    const out: Span = { ...span, name, resource, scope, attributes, events, links };
    addDropped(out, 'droppedAttributesCount', droppedAttributes);
    addDropped(out, 'droppedEventsCount', droppedEvents);
    addDropped(out, 'droppedLinksCount', droppedLinks);
    return out;
  }

  private event(event: SpanEvent): SpanEvent {
    const name = capString(event.name, this.limits.maxNameBytes);
    const attributes = this.attributes(event.attributes, this.limits.maxAttributesPerEvent);
    if (name === event.name && attributes === event.attributes) return event;
    const out: SpanEvent = { ...event, name, attributes };
    addDropped(out, 'droppedAttributesCount', this.dropped);
    return out;
  }

  private link(link: SpanLink): SpanLink {
    const attributes = this.attributes(link.attributes, this.limits.maxAttributesPerLink);
    if (attributes === link.attributes) return link;
    const out: SpanLink = { ...link, attributes };
    addDropped(out, 'droppedAttributesCount', this.dropped);
    return out;
  }

  /** The first `max` items, each limited; the same array when nothing changed. */
  private list<T>(items: T[], max: number, limit: (item: T) => T): T[] {
    const kept = items.length > max ? items.slice(0, max) : items;
    let out: T[] | undefined = kept === items ? undefined : kept;
    for (let i = 0; i < kept.length; i++) {
      const item = kept[i]!;
      const limited = limit(item);
      if (limited !== item) {
        out ??= kept.slice();
        out[i] = limited;
      }
    }
    return out ?? items;
  }

  private resource(resource: Attributes): Attributes {
    let out = this.resources.get(resource);
    if (out === undefined) {
      out = this.attributes(resource, Number.POSITIVE_INFINITY);
      this.resources.set(resource, out);
    }
    return out;
  }

  private scope(scope: InstrumentationScope): InstrumentationScope {
    let out = this.scopes.get(scope);
    if (out === undefined) {
      const name = capString(scope.name, this.limits.maxNameBytes);
      const version = capString(scope.version, this.limits.maxNameBytes);
      out = name === scope.name && version === scope.version ? scope : { name, version };
      this.scopes.set(scope, out);
    }
    return out;
  }

  /**
   * The first `max` attributes with their keys capped (at every depth); sets `dropped` to how many
   * were left out. Checked first without allocating: most attribute maps are within the limits.
   */
  private attributes(attributes: Attributes, max: number): Attributes {
    this.dropped = 0;
    let count = 0;
    let within = true;
    for (const key in attributes) {
      const value = attributes[key]!;
      if (++count > max || this.key(key) !== key || this.value(value, 0) !== value) {
        within = false;
        break;
      }
    }
    if (within) return attributes;
    const out: Attributes = {};
    let kept = 0;
    for (const key in attributes) {
      if (kept >= max) {
        this.dropped++;
        continue;
      }
      kept++;
      setAttribute(out, this.key(key), this.value(attributes[key]!, 0));
    }
    return out;
  }

  private key(key: string): string {
    return capString(key, this.limits.maxAttributeKeyBytes);
  }

  /** A value with the keys of its kvlists capped, at any depth; the value itself when none was. */
  private value(value: AttributeValue, depth: number): AttributeValue {
    if (typeof value !== 'object' || value instanceof Uint8Array || depth >= MAX_DEPTH) {
      return value;
    }
    if (Array.isArray(value)) {
      let out: AttributeValue[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const item = value[i]!;
        const limited = this.value(item, depth + 1);
        if (limited !== item) {
          out ??= value.slice();
          out[i] = limited;
        }
      }
      return out ?? value;
    }
    let out: { [key: string]: AttributeValue } | undefined;
    for (const key in value) {
      const item = value[key]!;
      const k = this.key(key);
      const v = this.value(item, depth + 1);
      if (out === undefined) {
        if (k === key && v === item) continue;
        // The first change: copy the entries before it (once), then build from here on.
        out = {};
        for (const before in value) {
          if (before === key) break;
          setAttribute(out, before, value[before]!);
        }
      }
      setAttribute(out, k, v);
    }
    return out ?? value;
  }
}

function addDropped<
  K extends 'droppedAttributesCount' | 'droppedEventsCount' | 'droppedLinksCount',
>(into: { [P in K]?: number }, field: K, dropped: number): void {
  if (dropped > 0) into[field] = (into[field] ?? 0) + dropped;
}
