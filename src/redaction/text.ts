/**
 * Text rules: the configured RE2 value patterns, the enabled PII detectors and the enabled secret
 * detectors, plus (for free text such as error messages) `key=value` / `"key": "value"` pairs whose key is a redacted key. Every
 * rule reports ranges of the original string; overlapping ranges are merged and each is replaced
 * once, so rules never see each other's `[REDACTED]`.
 */
import RE2 from 're2';
import { isBareValueEnd } from './chars.js';
import { KEY_SECRET, type KeyMatcher } from './keys.js';
import { type PiiDetector, type PiiScanner, SCANNERS, tokenDigits } from './pii.js';
import type { SecretScanner } from './secrets.js';

/** The replacement text for every redacted value or part of a value (spec rule 2). */
export const REDACTED = '[REDACTED]';

export interface ValueRules {
  /** False when no pattern and no detector is enabled. */
  readonly active: boolean;
  /** True when user patterns exist (they can match anything, so no cheap pre-check applies). */
  readonly hasPatterns: boolean;
  /**
   * Cheap checks: which rules may match `s`, as a bit mask for `collect` (bit 0 the patterns,
   * bit i+1 the i-th enabled PII detector, the next bit the secret detectors). 0 means no rule can
   * match. Right for JSON text too: a string holding JSON whose gate is 0 needs no parsing.
   */
  gate(s: string): number;
  /** Appends the ranges (pairs of offsets, end exclusive) the rules in `mask` match in `s`. */
  collect(s: string, mask: number, out: number[]): void;
}

export function compileValueRules(
  patterns: readonly RE2[],
  detectors: readonly PiiDetector[],
  secrets?: SecretScanner,
): ValueRules {
  const scanners: PiiScanner[] = [...new Set(detectors)].map((d) => SCANNERS[d]);
  const secretsBit = 2 << scanners.length;
  let minLength = patterns.length > 0 ? 1 : Number.POSITIVE_INFINITY;
  for (const scanner of scanners) minLength = Math.min(minLength, scanner.minLength);
  if (secrets !== undefined) minLength = Math.min(minLength, secrets.minLength);
  const digitsMatter = detectors.some((d) => d !== 'email');
  let set: InstanceType<typeof RE2.Set> | undefined;
  if (patterns.length > 1) {
    try {
      set = new RE2.Set(patterns, 'u');
    } catch {
      set = undefined; // each pattern compiled alone; scanning them one by one is still correct
    }
  }

  const collectPatterns = (s: string, out: number[]): void => {
    const which = set === undefined ? undefined : set.match(s);
    if (which !== undefined && which.length === 0) return;
    for (const index of which ?? patterns.keys()) {
      const re = patterns[index]!;
      re.lastIndex = 0;
      for (let m = re.exec(s); m !== null; m = re.exec(s)) {
        if (m[0].length === 0) {
          re.lastIndex = m.index + 1;
          continue;
        }
        out.push(m.index, m.index + m[0].length);
      }
    }
  };

  return {
    active: patterns.length > 0 || scanners.length > 0 || secrets !== undefined,
    hasPatterns: patterns.length > 0,
    gate(s) {
      if (s.length < minLength) return 0;
      let mask = patterns.length > 0 ? 1 : 0;
      if (secrets !== undefined && s.length >= secrets.minLength && secrets.worth(s)) {
        mask |= secretsBit;
      }
      if (scanners.length === 0) return mask;
      const loose = digitsMatter ? tokenDigits(s, 0, 13, true) : 0;
      for (let i = 0; i < scanners.length; i++) {
        const scanner = scanners[i]!;
        if (s.length >= scanner.minLength && scanner.worth(s, loose)) mask |= 2 << i;
      }
      return mask;
    },
    collect(s, mask, out) {
      if (mask & 1) collectPatterns(s, out);
      for (let i = 0; i < scanners.length; i++) if (mask & (2 << i)) scanners[i]!.scan(s, out);
      if (mask & secretsBit) secrets!.scan(s, out);
    },
  };
}

// key, optional closing quote, `:` or `=`, then a quoted value, an auth scheme and its
// credential, or a bare word.
const KEY_VALUE = new RE2(
  '([A-Za-z_][A-Za-z0-9_.\\-]*)["\']?[ \\t]*[:=][ \\t]*(?:"((?:[^"\\\\\\n]|\\\\.)*)"|\'((?:[^\'\\\\\\n]|\\\\.)*)\'|((?:[Bb]earer|[Bb]asic|[Tt]oken|[Dd]igest)[ \\t]+[^\\s"\',;&]+|[^\\s"\',;&)}\\]:=]+))',
  'gu',
);

/**
 * Appends the value ranges of `key=value`, `key: value`, `"key": "value"` pairs in free text whose
 * key is a redacted key (`password=hunter2`, `Authorization: Bearer …`, `{'api_key': '…'}`).
 */
export function collectKeyValues(s: string, keys: KeyMatcher, out: number[]): void {
  if (!s.includes('=') && !s.includes(':')) return;
  // Where the last bare secret value ran to. Matches come in order and each starts at or after
  // the end of the previous secret's regex match, so a later bare value that ends before `reach`
  // runs on to `reach` too: its characters were scanned already (`password=a:password=a:…` would
  // otherwise rescan the rest of the text once per pair). The scan still goes on inside the value,
  // for quoted pairs it holds (`password=a:api_key="q r"`).
  let reach = 0;
  KEY_VALUE.lastIndex = 0;
  for (let m = KEY_VALUE.exec(s); m !== null; m = KEY_VALUE.exec(s)) {
    const quoted = m[2] ?? m[3];
    const value = quoted ?? m[4] ?? '';
    let end = m.index + m[0].length - (quoted === undefined ? 0 : 1);
    const start = end - value.length;
    if (keys.classify(m[1]!) === KEY_SECRET) {
      // A bare value stops at `:` and `=` so that scanning stays linear; a secret's value runs on
      // (`user:pass`, base64 padding).
      if (quoted === undefined) {
        if (end < reach) end = reach;
        else {
          while (end < s.length && !isBareValueEnd(s.charCodeAt(end))) end++;
          reach = end;
        }
      }
      if (end > start) out.push(start, end);
    } else {
      // The value may itself hold a pair (`error: "password=…"`): resume the scan inside it.
      KEY_VALUE.lastIndex = start;
    }
  }
}

/** `s` with the given ranges (pairs, any order, may overlap or touch) each replaced once. */
export function replaceRanges(s: string, ranges: number[]): string {
  if (ranges.length === 0) return s;
  // One match is the common case: no pairs to build and sort.
  if (ranges.length === 2) return s.slice(0, ranges[0]) + REDACTED + s.slice(ranges[1]);
  const sorted = startsInOrder(ranges) ? ranges : sortedRanges(ranges);
  const parts: string[] = [];
  let at = 0;
  let start = sorted[0]!;
  let end = sorted[1]!;
  for (let i = 2; i <= sorted.length; i += 2) {
    if (i < sorted.length && sorted[i]! <= end) {
      end = Math.max(end, sorted[i + 1]!);
      continue;
    }
    parts.push(s.slice(at, start), REDACTED);
    at = end;
    start = sorted[i]!;
    end = sorted[i + 1]!;
  }
  parts.push(s.slice(at));
  return parts.join('');
}

/** Whether the ranges' starts never go back (one rule's ranges usually come in order). */
function startsInOrder(ranges: number[]): boolean {
  for (let i = 2; i < ranges.length; i += 2) if (ranges[i]! < ranges[i - 2]!) return false;
  return true;
}

function sortedRanges(ranges: number[]): number[] {
  const pairs: [number, number][] = [];
  for (let i = 0; i + 1 < ranges.length; i += 2) pairs.push([ranges[i]!, ranges[i + 1]!]);
  pairs.sort((x, y) => x[0] - y[0]);
  return pairs.flat();
}
