/**
 * The secret detectors (`traces.redaction.secrets`): credentials in free text, found by anchors
 * (literal strings: `Bearer`, `eyJ`, `ghp_`, `-----BEGIN`, and `=` / `:` for `key=value` pairs)
 * and then checked precisely by the anchor's rule (secret-pairs.ts, secret-tokens.ts).
 *
 * Everything is linear in the text: anchors are found by one left-to-right pass, and every rule
 * reads either a bounded number of characters or up to the position it returns, before which it
 * is not asked again. The pass uses a regular expression of the literal anchors (native, about
 * twice as fast as a JavaScript loop on ordinary text), but each match costs a call, so when
 * anchors come densely (a value of `=====…` or `Bearer Bearer …`) the rest of the text is walked
 * by a JavaScript loop instead, which costs the same per character whatever it finds.
 */

import { type CharClass, charClass } from './chars.js';
import { pairRule } from './secret-pairs.js';
import { type Rule, Scan, SECRET_DETECTORS, type SecretDetector } from './secret-scan.js';
import { TOKEN_RULES } from './secret-tokens.js';

export { SECRET_DETECTORS, type SecretDetector } from './secret-scan.js';

export interface SecretScanner {
  /** Shortest text that can hold a secret (`pwd=x`). */
  readonly minLength: number;
  /**
   * Whether `s` may hold a secret (a loose scan, see Scan): may say yes wrongly, never no. Also
   * right for JSON text, whose escapes can hide what a strict scan looks for.
   */
  worth(s: string): boolean;
  /** Appends the ranges (pairs of offsets, end exclusive) of the secrets in `s` to `out`. */
  scan(s: string, out: number[]): void;
}

const MIN_LENGTH = 5;
/** A loose scan's `out`: it records no ranges. */
const NO_RANGES: number[] = [];
/** When DENSE_HITS anchors come within DENSE_HITS × DENSE_GAP characters, the loop takes over. */
const DENSE_HITS = 32;
const DENSE_GAP = 32;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

/**
 * An alternation of `literals`, factored by common first characters (`g(?:hp_|lpat-)`): the
 * regular expression engine then tests each first character once per position.
 */
function alternation(literals: readonly string[]): string {
  const groups = new Map<string, string[]>();
  for (const literal of literals) {
    const rest = groups.get(literal[0]!) ?? [];
    rest.push(literal.slice(1));
    groups.set(literal[0]!, rest);
  }
  const parts: string[] = [];
  for (const [first, rests] of groups) {
    const tails = rests.filter((r) => r !== '');
    if (tails.length < rests.length) {
      // One literal ends here: no literal may be a prefix of another (secrets.test.ts checks).
      parts.push(escapeRegExp(first));
    } else if (tails.length === 1) {
      parts.push(escapeRegExp(first + tails[0]!));
    } else {
      parts.push(`${escapeRegExp(first)}(?:${alternation(tails)})`);
    }
  }
  return parts.join('|');
}

/**
 * Whether the anchor at `at` follows a character of `glue`. A JSON escape (`\n`, `\t`, `\"` …)
 * is a boundary: in JSON text a token may follow one.
 */
function glued(s: string, at: number, glue: CharClass): boolean {
  if (at === 0) return false;
  const c = s.charCodeAt(at - 1);
  if (!(c < 128 ? glue.ascii[c] === 1 : glue.others)) return false;
  return !(at >= 2 && s.charCodeAt(at - 2) === 0x5c && JSON_ESCAPE.ascii[c] === 1);
}

const JSON_ESCAPE = charClass((c) => 'nrtbf"/\\'.includes(String.fromCharCode(c)));

/** Compiles the enabled detectors, or returns undefined when none is. */
export function compileSecrets(enabled: readonly SecretDetector[]): SecretScanner | undefined {
  const on = new Set(enabled);
  const rules: Rule[] = [];
  for (const detector of SECRET_DETECTORS) {
    if (on.has(detector)) rules.push(...(TOKEN_RULES[detector] ?? []));
  }
  const pairs = pairRule(on);
  if (pairs !== undefined) rules.push(pairs);
  if (rules.length === 0) return undefined;
  return new Scanner(rules);
}

class Scanner implements SecretScanner {
  readonly minLength = MIN_LENGTH;
  /** Every anchor, and the rule (index into `rules`) of each. */
  private readonly anchors: string[] = [];
  private readonly ruleOf: number[] = [];
  /** Anchor indexes by last character, longest first (the pattern's matches end there). */
  private readonly byLast: (number[] | undefined)[] = new Array(128);
  /** For the loop: the anchors starting with the characters `c` `d`, at `c * 128 + d`. */
  private readonly byPair: (number[] | undefined)[] = new Array(128 * 128);
  /** For the loop: the one-character anchor of each character, or -1. */
  private readonly single = new Int16Array(128).fill(-1);
  private readonly pattern: RegExp;
  /** Per rule, the position before which it is not asked again (reset per scan). */
  private readonly next: Int32Array;
  /** The last string found worth scanning and its first candidate (the strict scan starts there). */
  private worthString: string | undefined;
  private worthAt = 0;

  constructor(private readonly rules: readonly Rule[]) {
    rules.forEach((rule, r) => {
      for (const anchor of rule.anchors) {
        const i = this.anchors.push(anchor) - 1;
        this.ruleOf.push(r);
        const first = anchor.charCodeAt(0);
        if (anchor.length === 1) this.single[first] = i;
        else {
          const pair = first * 128 + anchor.charCodeAt(1);
          this.byPair[pair] = [...(this.byPair[pair] ?? []), i];
        }
        const last = anchor.charCodeAt(anchor.length - 1);
        this.byLast[last] = [...(this.byLast[last] ?? []), i].sort(
          (x, y) => this.anchors[y]!.length - this.anchors[x]!.length,
        );
      }
    });
    this.pattern = new RegExp(alternation(this.anchors), 'g');
    this.next = new Int32Array(rules.length);
  }

  worth(s: string): boolean {
    const scan = new Scan(s, NO_RANGES, true);
    const first = this.run(scan, 0);
    this.worthString = s;
    this.worthAt = first;
    return first >= 0;
  }

  scan(s: string, out: number[]): void {
    let from = 0;
    if (this.worthString === s) {
      from = this.worthAt;
      this.worthString = undefined; // no secret-bearing text outlives its scan here
      if (from < 0) return;
    }
    this.run(new Scan(s, out, false), from);
  }

  /**
   * Runs the rules over the anchors of `scan.s` from `from`; returns the first anchor that found
   * something (-1 if none). A loose scan stops there.
   */
  private run(scan: Scan, from: number): number {
    const s = scan.s;
    this.next.fill(0);
    const pattern = this.pattern;
    let first = -1;
    let hits = 0;
    let window = from;
    // `test` rather than `exec`: no match object per anchor; the anchor is found from its end.
    pattern.lastIndex = from;
    for (let after = from; pattern.test(s); after = pattern.lastIndex) {
      const i = this.anchorEndingAt(s, pattern.lastIndex, after);
      const at = pattern.lastIndex - this.anchors[i]!.length;
      if (this.visit(scan, at, i) && first < 0) {
        first = at;
        if (scan.loose) return first;
      }
      if (++hits === DENSE_HITS) {
        if (at - window < DENSE_HITS * DENSE_GAP) return this.walk(scan, at + 1, first);
        hits = 0;
        window = at;
      }
      pattern.lastIndex = at + 1;
    }
    return first;
  }

  /** The anchor the pattern just matched, ending at `end` and starting at or after `after`. */
  private anchorEndingAt(s: string, end: number, after: number): number {
    for (const i of this.byLast[s.charCodeAt(end - 1)]!) {
      const start = end - this.anchors[i]!.length;
      if (start >= after && s.startsWith(this.anchors[i]!, start)) return i;
    }
    throw new Error('unreachable: the pattern matched no anchor');
  }

  /**
   * `run`'s loop in JavaScript, for text dense with anchors: no call per anchor found, and only
   * the anchors that start with the two characters at a position are compared there.
   */
  private walk(scan: Scan, from: number, first: number): number {
    const s = scan.s;
    const { byPair, single } = this;
    const last = s.length - 1;
    for (let at = from; at <= last; at++) {
      const c = s.charCodeAt(at);
      if (c >= 128) continue;
      let i = single[c]!;
      if (i < 0) {
        const d = at < last ? s.charCodeAt(at + 1) : 0;
        const candidates = d < 128 ? byPair[c * 128 + d] : undefined;
        if (candidates === undefined) continue;
        i = this.matching(s, at, candidates);
        if (i < 0) continue;
      }
      if (this.visit(scan, at, i) && first < 0) {
        first = at;
        if (scan.loose) return first;
      }
    }
    return first;
  }

  /** The one of `candidates` (anchors whose first two characters are at `at`) found at `at`. */
  private matching(s: string, at: number, candidates: number[]): number {
    for (const i of candidates) {
      const anchor = this.anchors[i]!;
      let k = 2;
      while (k < anchor.length && s.charCodeAt(at + k) === anchor.charCodeAt(k)) k++;
      if (k === anchor.length) return i;
    }
    return -1;
  }

  /** Asks the rule of anchor `i` about `at` (unless it already read past it); true if it found. */
  private visit(scan: Scan, at: number, i: number): boolean {
    const r = this.ruleOf[i]!;
    if (at < this.next[r]!) return false;
    const rule = this.rules[r]!;
    if (rule.notAfter !== undefined && glued(scan.s, at, rule.notAfter)) return false;
    const before = scan.found;
    this.next[r] = Math.max(at + 1, rule.check(scan, at, this.anchors[i]!.length));
    return !before && scan.found;
  }
}
