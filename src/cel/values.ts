/**
 * What evaluation gives back: an override's value as plain JSON, and evaluation errors reduced to
 * texts that cannot quote trace content.
 */
import {
  type CelError,
  type CelValue,
  isCelList,
  isCelMap,
  isCelType,
  isCelUint,
} from '@bufbuild/cel';
import { toJson } from '@bufbuild/protobuf';
import { isReflectMessage } from '@bufbuild/protobuf/reflect';
import { OPERATORS } from './declarations.js';
import type { FailureReason, ValueResult } from './types.js';

export function failed(error: string): { ok: false; error: string; reason: FailureReason } {
  return { ok: false, error, reason: 'error' };
}

/** Deepest list or map nesting `evaluateValue` converts. */
const MAX_RESULT_DEPTH = 64;

/** A CEL value as plain JSON (see `evaluateValue`); fails only on depth or an unknown value. */
export function toJsonValue(v: CelValue, depth: number): ValueResult {
  if (depth > MAX_RESULT_DEPTH) return failed(`value nests more than ${MAX_RESULT_DEPTH} levels`);
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return { ok: true, value: v };
    case 'number':
      return { ok: true, value: Number.isFinite(v) ? v : String(v) };
    case 'bigint':
      return { ok: true, value: bigintJson(v) };
    case 'object':
      break;
    default:
      return failed('value cannot be converted');
  }
  if (v === null) return { ok: true, value: null };
  if (v instanceof Uint8Array) return { ok: true, value: Buffer.from(v).toString('base64') };
  if (isCelUint(v)) return { ok: true, value: bigintJson(v.value) };
  if (isCelList(v)) {
    const out: unknown[] = [];
    for (const el of v) {
      const r = toJsonValue(el, depth + 1);
      if (!r.ok) return r;
      out.push(r.value);
    }
    return { ok: true, value: out };
  }
  if (isCelMap(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, el] of v) {
      const r = toJsonValue(el, depth + 1);
      if (!r.ok) return r;
      // A key `__proto__` must stay a key, not replace the prototype.
      Object.defineProperty(out, isCelUint(k) ? k.value.toString() : String(k), {
        value: r.value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return { ok: true, value: out };
  }
  if (isCelType(v)) return { ok: true, value: String(v) };
  if (isReflectMessage(v)) {
    // Timestamps and durations; their JSON forms are RFC 3339 text and `1.5s`.
    const json = toJson(v.desc, v.message);
    if (typeof json === 'string') return { ok: true, value: json };
  }
  return failed('value cannot be converted');
}

function bigintJson(v: bigint): number | string {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v.toString();
}

/** Evaluation errors reduced to texts that cannot quote trace content (keys, values, patterns). */
export function safeMessage(err: CelError): string {
  const m = err.message;
  if (/no matching overload/.test(m)) {
    // Anchored, so a value quoted inside some other message cannot pose as a signature.
    const sig =
      /^found no matching overload for '?([\w@?:!&|<>=+*/%.-]+)'? applied to '([\w\s,.()]*)'$/.exec(
        m,
      );
    if (sig === null) return 'no matching overload';
    return `no matching overload for '${OPERATORS[sig[1]!] ?? sig[1]}' applied to '${sig[2]}'`;
  }
  if (/field not found|no such key|no such field/.test(m)) return 'no such key';
  if (/out of bounds/.test(m)) return 'index out of bounds';
  if (/divide by zero/.test(m)) return 'division by zero';
  if (/modulus by zero/.test(m)) return 'modulus by zero';
  if (/overflow|out of range/.test(m)) return 'value out of range';
  if (/regular expression|regexp/.test(m)) return 'invalid regular expression';
  if (/type mismatch/.test(m)) return 'type mismatch';
  if (/key conflict/.test(m)) return 'duplicate map key';
  if (/unresolved attribute|undeclared/.test(m)) return 'unknown variable';
  return 'evaluation error';
}
