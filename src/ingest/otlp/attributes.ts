/** Attribute rules shared by both decoders. */
import type { Attributes, AttributeValue } from '../../core/index.js';

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
