/** Attribute rules shared by both decoders. */
import type { Attributes, AttributeValue } from '../../core/index.js';
import type { DecodeOptions, SpanCountLimits } from '../types.js';

/** Deepest AnyValue nesting accepted (arrays and kvlists inside each other). */
export const MAX_VALUE_DEPTH = 32;

/** Sets an attribute; a `__proto__` key becomes an own property instead of a prototype change. */
export function setAttribute(into: Attributes, key: string, value: AttributeValue): void {
  if (key === '__proto__') {
    Object.defineProperty(into, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else into[key] = value;
}

const NO_COUNT_LIMITS: SpanCountLimits = {
  maxAttributesPerSpan: Number.POSITIVE_INFINITY,
  maxEventsPerSpan: Number.POSITIVE_INFINITY,
  maxLinksPerSpan: Number.POSITIVE_INFINITY,
  maxAttributesPerEvent: Number.POSITIVE_INFINITY,
  maxAttributesPerLink: Number.POSITIVE_INFINITY,
};

/**
 * The count limits a decoder applies: attributes (KeyValues as listed, a repeated key counting
 * again), events and links past them are skipped unread and counted as dropped.
 */
export function countLimitsOf(options: DecodeOptions): SpanCountLimits {
  return options.limits ?? NO_COUNT_LIMITS;
}
