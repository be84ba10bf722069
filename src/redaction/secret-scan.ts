import type { CharClass } from './chars.js';

/**
 * What the secret detectors share: their names, the state of one scan of one string, and the
 * shape of a rule. secrets.ts runs the rules; secret-pairs.ts and secret-tokens.ts hold them.
 */

/** The built-in secret detectors (`traces.redaction.secrets`), all on by default. */
export const SECRET_DETECTORS = [
  'http-auth',
  'password',
  'url-userinfo',
  'url-query',
  'private-key',
  'jwt',
  'aws',
  'github',
  'gitlab',
  'slack',
  'stripe',
  'llm-api-key',
  'google-api-key',
] as const;
export type SecretDetector = (typeof SECRET_DETECTORS)[number];

/**
 * One scan of one string. A strict scan appends the ranges to redact to `out`. A loose scan only
 * answers "may this string hold a secret?", for strings that may be JSON text: there, escapes
 * (`\"`, `\/`) stand between a secret and what surrounds it, so checks of the context and of the
 * value's shape are skipped where escapes could mislead them (a key is enough for a pair), and the
 * scan stops at the first candidate. A loose scan may say yes wrongly, never no: every strict match is a loose one.
 */
export class Scan {
  /** True once a range (strict) or a candidate (loose) was found. */
  found = false;
  /** Lazily found `curl` and line-break positions (secret-tokens.ts), -2 before the first look. */
  curlBefore = -2;
  curlNext = -2;
  lineBefore = -2;
  lineNext = -2;

  constructor(
    readonly s: string,
    /** Where a strict scan appends its ranges (pairs of offsets, end exclusive). */
    readonly out: number[],
    readonly loose: boolean,
  ) {}

  /** Redacts `s[start, end)` (a strict scan), or notes a candidate (a loose one). */
  hit(start: number, end: number): void {
    if (end <= start) return;
    if (!this.loose) this.out.push(start, end);
    this.found = true;
  }

  /** A loose scan's candidate whose value was not checked. */
  candidate(): void {
    this.found = true;
  }
}

/**
 * Looks at the candidate whose anchor (`length` characters) starts at `at` and returns the position before which this
 * rule needs no further look (at least `at + 1`): the end of what it examined, so that no rule
 * reads the same characters twice and every scan stays linear.
 */
export type RuleCheck = (scan: Scan, at: number, length: number) => number;

export interface Rule {
  /** Case-sensitive literals that start a candidate. None is a prefix of another rule's. */
  readonly anchors: readonly string[];
  /**
   * Characters that, right before an anchor, make it no candidate (tested before `check` is
   * called, which keeps text dense with anchors cheap). A JSON escape there (`\neyJ…`) is a
   * boundary, not glue.
   */
  readonly notAfter?: CharClass;
  readonly check: RuleCheck;
}
