/**
 * PII detectors. RE2 finds candidates (linear time); small checks here accept or refuse them.
 * Each detector appends the ranges it redacts (pairs of UTF-16 offsets, end exclusive) to `out`.
 *
 * A call into RE2 costs microseconds, so each detector also has cheap checks in plain code (never
 * a regex): `worth` decides whether RE2 runs on a string at all, and between matches a
 * `…Possible(s, from)` check says whether another candidate can still start after the last one.
 * Most strings (prose, dates, versions, ids) never reach RE2. The checks may say yes wrongly but
 * never no: pii.test.ts checks that on random and planted strings.
 *
 * Numbers glued to a word are identifiers, not PII: a candidate is refused when the character
 * right beside it is a letter, digit or `_`, or is `-` or `.` (or `+` before it) joined to one.
 * So `ORD-415-555-2671`, `v1.2.3+14155552671`, `10.415.555.2671`, UUIDs and hex ids stay.
 */
import RE2 from 're2';
import { cardRangesInToken } from './card.js';

export const PII_DETECTORS = ['email', 'us-ssn', 'credit-card', 'phone'] as const;
export type PiiDetector = (typeof PII_DETECTORS)[number];

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isWordChar(c: number): boolean {
  return isDigit(c) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

function gluedBefore(s: string, start: number): boolean {
  if (start === 0) return false;
  const c = s.charCodeAt(start - 1);
  if (isWordChar(c)) return true;
  return (
    (c === 0x2d || c === 0x2e || c === 0x2b) && start >= 2 && isWordChar(s.charCodeAt(start - 2))
  );
}

function gluedAfter(s: string, end: number): boolean {
  if (end >= s.length) return false;
  const c = s.charCodeAt(end);
  if (isWordChar(c)) return true;
  return (c === 0x2d || c === 0x2e) && end + 1 < s.length && isWordChar(s.charCodeAt(end + 1));
}

function digitsOf(s: string): string {
  let d = '';
  for (let i = 0; i < s.length; i++) if (isDigit(s.charCodeAt(i))) d += s[i];
  return d;
}

/**
 * The most digits in one number at or after `from`, counted up to `enough`. Strict: digits joined
 * by single spaces or dashes (card and SSN candidates). Loose: joined by up to three of ` -.()`
 * (phone candidates). Digits glued to a word are not counted until a space or parenthesis starts
 * a fresh number, since no candidate can start there. Detectors only run when the count reaches
 * their minimum, so this must never count less than a real candidate has.
 */
export function tokenDigits(s: string, from: number, enough: number, loose: boolean): number {
  const maxGap = loose ? 3 : 1;
  let best = 0;
  let run = 0;
  let gap = 0;
  let inNumber = false;
  let counting = false;
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 57) {
      inNumber = false; // letters and most punctuation: the common case, kept cheap
    } else if (c >= 48) {
      if (!inNumber) {
        inNumber = true;
        counting = !gluedBefore(s, i);
        run = 0;
      } else if (!counting && gap > 0 && !gluedBefore(s, i)) {
        counting = true;
        run = 0;
      }
      gap = 0;
      if (!counting) continue;
      if (++run >= enough) return run;
      if (run > best) best = run;
    } else if (
      inNumber &&
      gap < maxGap &&
      (c === 0x20 || c === 0x2d || (loose && (c === 0x2e || c === 0x28 || c === 0x29)))
    ) {
      gap++;
    } else {
      inNumber = false;
    }
  }
  return best;
}

/** Runs `re` (global) over `s` while `possible` says a match can still start; skips empty ones. */
function each(
  re: RE2,
  s: string,
  possible: (s: string, from: number) => boolean,
  accept: (m: RegExpExecArray) => void,
): void {
  re.lastIndex = 0;
  while (possible(s, re.lastIndex)) {
    const m = re.exec(s);
    if (m === null) return;
    if (m[0].length === 0) re.lastIndex = m.index + 1;
    else accept(m);
  }
}

export interface PiiScanner {
  /** Shortest possible match. */
  readonly minLength: number;
  /**
   * Whether `s` may hold a match (cheap; may say yes wrongly, never no). `loose` is
   * `tokenDigits(s, 0, 13, true)`, computed once for all detectors.
   */
  worth(s: string, loose: number): boolean;
  scan(s: string, out: number[]): void;
}

const EMAIL = new RE2(
  '[A-Za-z0-9._%+\\-]+@[A-Za-z0-9](?:[A-Za-z0-9\\-]*[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9\\-]*[A-Za-z0-9])?)*\\.[A-Za-z]{2,63}',
  'gu',
);

function emailPossible(s: string, from: number): boolean {
  // A match starting at or after `from` has at least one character before its `@`.
  const at = s.indexOf('@', from + 1);
  return at > 0 && s.indexOf('.', at) > at;
}

/** `name@host.tld` (ASCII). `user@localhost` and `pkg@1.2.3` have no letter TLD and stay. */
export const email: PiiScanner = {
  minLength: 6, // a@b.cd
  worth: (s) => emailPossible(s, 0),
  scan(s, out) {
    each(EMAIL, s, emailPossible, (m) => {
      out.push(m.index, m.index + m[0].length);
    });
  },
};

const SSN = new RE2('\\d{3}-\\d{2}-\\d{4}|\\d{3} \\d{2} \\d{4}', 'gu');

const SSN_DIGITS = [0, 1, 2, 4, 5, 7, 8, 9, 10];

/** `###-##-####` or `### ## ####` at `i`. */
function ssnShapeAt(s: string, i: number): boolean {
  const sep = s.charCodeAt(i + 3);
  if ((sep !== 0x2d && sep !== 0x20) || s.charCodeAt(i + 6) !== sep) return false;
  for (const k of SSN_DIGITS) if (!isDigit(s.charCodeAt(i + k))) return false;
  return true;
}

function ssnPossible(s: string, from: number): boolean {
  for (let i = from; i + 11 <= s.length; i++) {
    if (isDigit(s.charCodeAt(i)) && ssnShapeAt(s, i)) return true;
  }
  return false;
}

/** `###-##-####` (or with spaces); area 000, 666, 900–999, group 00 and serial 0000 are not SSNs. */
export const usSsn: PiiScanner = {
  minLength: 11,
  worth: (s, loose) => loose >= 9 && ssnPossible(s, 0),
  scan(s, out) {
    each(SSN, s, ssnPossible, (m) => {
      const end = m.index + m[0].length;
      if (gluedBefore(s, m.index) || gluedAfter(s, end)) return;
      const d = digitsOf(m[0]);
      const area = d.slice(0, 3);
      if (area === '000' || area === '666' || area[0] === '9') return;
      if (d.slice(3, 5) === '00' || d.slice(5) === '0000') return;
      out.push(m.index, end);
    });
  },
};

const CARD = new RE2('\\d(?:[ \\-]?\\d){12,}', 'gu');

function cardPossible(s: string, from: number): boolean {
  return tokenDigits(s, from, 13, false) >= 13;
}

/** See card.ts for the exact rule. */
export const creditCard: PiiScanner = {
  minLength: 13,
  worth: (s, loose) => loose >= 13 && cardPossible(s, 0),
  scan(s, out) {
    each(CARD, s, cardPossible, (m) => {
      if (gluedBefore(s, m.index) || gluedAfter(s, m.index + m[0].length)) return;
      const ranges = cardRangesInToken(m[0]);
      for (let i = 0; i < ranges.length; i++) out.push(m.index + ranges[i]!);
    });
  },
};

// E.164: `+`, a country code digit 1–9, then up to 14 more digits with optional single
// separators and parentheses ("+44 (0)20 7946 0958").
const E164 = new RE2('\\+[1-9](?:[ .\\-]?\\(?\\d\\)?){7,14}', 'gu');
// NANP: 3-3-4 with separators, optional +1 / 1 and parentheses around the area code.
const NANP = new RE2(
  '(?:\\+?1[ .\\-]?)?(?:\\(\\d{3}\\)[ .\\-]?|\\d{3}[ .\\-])\\d{3}[ .\\-]\\d{4}',
  'gu',
);

function e164Possible(s: string, from: number): boolean {
  for (let plus = s.indexOf('+', from); plus >= 0; plus = s.indexOf('+', plus + 1)) {
    if (gluedBefore(s, plus) || !isDigit(s.charCodeAt(plus + 1))) continue;
    if (tokenDigits(s, plus + 1, 8, true) >= 8) return true;
  }
  return false;
}

function nanpPossible(s: string, from: number): boolean {
  return tokenDigits(s, from, 10, true) >= 10;
}

/**
 * E.164 (`+` and 8–15 digits, separators allowed) and NANP (`415-555-2671`, `(415) 555-2671`,
 * `+1 415.555.2671`; area code and exchange start with 2–9). Plain digit runs, dates, versions,
 * IPs and ids do not match: NANP needs separators, E.164 needs its `+`.
 */
export const phone: PiiScanner = {
  minLength: 9, // +12345678
  worth: (s, loose) => loose >= 10 || (loose >= 8 && e164Possible(s, 0)),
  scan(s, out) {
    each(E164, s, e164Possible, (m) => {
      const end = m.index + m[0].length;
      if (gluedBefore(s, m.index) || gluedAfter(s, end)) return;
      out.push(m.index, end);
    });
    each(NANP, s, nanpPossible, (m) => {
      const end = m.index + m[0].length;
      if (gluedBefore(s, m.index) || gluedAfter(s, end)) return;
      let d = digitsOf(m[0]);
      if (d.length === 11) d = d.slice(1);
      if (d.length !== 10 || d[0]! < '2' || d[3]! < '2') return;
      out.push(m.index, end);
    });
  },
};

export const SCANNERS: Record<PiiDetector, PiiScanner> = {
  email,
  'us-ssn': usSsn,
  'credit-card': creditCard,
  phone,
};
