/**
 * PII detectors. A finder per regular expression (quoted beside it) finds candidates; small checks
 * here accept or refuse them. Each detector appends the ranges it redacts (pairs of UTF-16
 * offsets, end exclusive) to `out`.
 *
 * The finders are hand-written, linear-time matchers that return exactly what RE2 returns for
 * their expression (leftmost match, the same ranges; pii.test.ts compares them with RE2 on
 * random and planted strings): a call into RE2 costs microseconds, and planted PII made those
 * calls half of the cost of redacting a span. Each detector also has cheap checks: `worth` decides
 * whether the detector runs on a string at all, and between matches a `…Possible(s, from)` check
 * says whether another candidate can still start after the last one. The checks may say yes
 * wrongly but never no: pii.test.ts checks that on random and planted strings.
 *
 * Numbers glued to a word are identifiers, not PII: a candidate is refused when the character
 * right beside it is a letter, digit or `_`, or is `-` or `.` (or `+` before it) joined to one.
 * So `ORD-415-555-2671`, `v1.2.3+14155552671`, `10.415.555.2671`, UUIDs and hex ids stay.
 */
import { cardRangesInToken } from './card.js';
import { isAlnum, isDigit, isLetter, isWordChar } from './chars.js';

export const PII_DETECTORS = ['email', 'us-ssn', 'credit-card', 'phone'] as const;
export type PiiDetector = (typeof PII_DETECTORS)[number];

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

/**
 * Finds the leftmost match at or after `from` and returns its start (or -1); the end is left in
 * `matchEnd`, so that scanning allocates nothing.
 */
export type Finder = (s: string, from: number) => number;

/** Where the match of the last finder call that returned a start ends (exclusive). */
export let matchEnd = 0;

/** Runs `find` over `s` while `possible` says a match can still start after the last one. */
function each(
  find: Finder,
  s: string,
  possible: (s: string, from: number) => boolean,
  accept: (start: number, end: number) => void,
): void {
  let from = 0;
  while (possible(s, from)) {
    const start = find(s, from);
    if (start < 0) return;
    from = matchEnd;
    accept(start, from);
  }
}

/** A separator between phone digits: space, `.` or `-`. */
function isPhoneSeparator(c: number): boolean {
  return c === 0x20 || c === 0x2e || c === 0x2d;
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

/** A character of the local part of an address: letters, digits and `._%+-`. */
function isLocalChar(c: number): boolean {
  return isAlnum(c) || c === 0x2e || c === 0x5f || c === 0x25 || c === 0x2b || c === 0x2d;
}

/**
 * The end of the domain label at `i` (`[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?`), or -1. Only the
 * longest label can be followed by the `.` every label needs after it, so no other is tried.
 */
function labelEnd(s: string, i: number): number {
  if (!isAlnum(s.charCodeAt(i))) return -1;
  let j = i + 1;
  while (isAlnum(s.charCodeAt(j)) || s.charCodeAt(j) === 0x2d) j++;
  return s.charCodeAt(j - 1) === 0x2d ? -1 : j;
}

/**
 * The end of the domain at `i` (labels, then `\.[A-Za-z]{2,63}`), or -1. Backtracking from the
 * longest run of labels, the regex ends at the last dot followed by two or more letters.
 */
function domainEnd(s: string, i: number): number {
  let end = -1;
  for (let e = labelEnd(s, i); e >= 0 && s.charCodeAt(e) === 0x2e; e = labelEnd(s, e + 1)) {
    let letters = 0;
    while (letters < 63 && isLetter(s.charCodeAt(e + 1 + letters))) letters++;
    if (letters >= 2) end = e + 1 + letters;
  }
  return end;
}

/**
 * `[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,63}`.
 * The local part cannot hold `@`, so every start before an `@` shares its domain, and the leftmost
 * one wins.
 */
export const findEmail: Finder = (s, from) => {
  for (let at = s.indexOf('@', from + 1); at > 0; at = s.indexOf('@', at + 1)) {
    let start = at;
    while (start > from && isLocalChar(s.charCodeAt(start - 1))) start--;
    if (start === at) continue;
    const end = domainEnd(s, at + 1);
    if (end >= 0) {
      matchEnd = end;
      return start;
    }
  }
  return -1;
};

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
    each(findEmail, s, emailPossible, (start, end) => {
      out.push(start, end);
    });
  },
};

const SSN_DIGITS = [0, 1, 2, 4, 5, 7, 8, 9, 10];

/** `###-##-####` or `### ## ####` at `i`. */
function ssnShapeAt(s: string, i: number): boolean {
  const sep = s.charCodeAt(i + 3);
  if ((sep !== 0x2d && sep !== 0x20) || s.charCodeAt(i + 6) !== sep) return false;
  for (const k of SSN_DIGITS) if (!isDigit(s.charCodeAt(i + k))) return false;
  return true;
}

/** `\d{3}-\d{2}-\d{4}|\d{3} \d{2} \d{4}`. */
export const findSsn: Finder = (s, from) => {
  for (let i = from; i + 11 <= s.length; i++) {
    if (isDigit(s.charCodeAt(i)) && ssnShapeAt(s, i)) {
      matchEnd = i + 11;
      return i;
    }
  }
  return -1;
};

function ssnPossible(s: string, from: number): boolean {
  return findSsn(s, from) >= 0;
}

/** `###-##-####` (or with spaces); area 000, 666, 900–999, group 00 and serial 0000 are not SSNs. */
export const usSsn: PiiScanner = {
  minLength: 11,
  worth: (s, loose) => loose >= 9 && ssnPossible(s, 0),
  scan(s, out) {
    each(findSsn, s, ssnPossible, (start, end) => {
      if (gluedBefore(s, start) || gluedAfter(s, end)) return;
      const d = digitsOf(s.slice(start, end));
      const area = d.slice(0, 3);
      if (area === '000' || area === '666' || area[0] === '9') return;
      if (d.slice(3, 5) === '00' || d.slice(5) === '0000') return;
      out.push(start, end);
    });
  },
};

/**
 * `\d(?:[ \-]?\d){12,}`: the greedy repetition takes a whole number (digits joined by single
 * spaces or dashes); a later start inside it has fewer digits, so only the first can match.
 */
export const findCard: Finder = (s, from) => {
  const n = s.length;
  let i = from;
  while (i < n) {
    if (!isDigit(s.charCodeAt(i))) {
      i++;
      continue;
    }
    let digits = 1;
    let j = i + 1;
    while (j < n) {
      const c = s.charCodeAt(j);
      if (isDigit(c)) j++;
      else if ((c === 0x20 || c === 0x2d) && isDigit(s.charCodeAt(j + 1))) j += 2;
      else break;
      digits++;
    }
    if (digits >= 13) {
      matchEnd = j;
      return i;
    }
    i = j;
  }
  return -1;
};

function cardPossible(s: string, from: number): boolean {
  return tokenDigits(s, from, 13, false) >= 13;
}

/** See card.ts for the exact rule. */
export const creditCard: PiiScanner = {
  minLength: 13,
  worth: (s, loose) => loose >= 13 && cardPossible(s, 0),
  scan(s, out) {
    each(findCard, s, cardPossible, (start, end) => {
      if (gluedBefore(s, start) || gluedAfter(s, end)) return;
      const ranges = cardRangesInToken(s.slice(start, end));
      for (let i = 0; i < ranges.length; i++) out.push(start + ranges[i]!);
    });
  },
};

/**
 * The end of one `[ .\-]?\(?\d\)?` at `i`, or -1. Each optional part is taken when present:
 * leaving one out leaves a separator or parenthesis where the next part needs a digit.
 */
function e164StepEnd(s: string, i: number): number {
  let j = i;
  if (isPhoneSeparator(s.charCodeAt(j))) j++;
  if (s.charCodeAt(j) === 0x28) j++;
  if (!isDigit(s.charCodeAt(j))) return -1;
  return s.charCodeAt(j + 1) === 0x29 ? j + 2 : j + 1;
}

/**
 * E.164: `\+[1-9](?:[ .\-]?\(?\d\)?){7,14}`, a country code digit 1–9, then up to 14 more digits
 * with optional single separators and parentheses ("+44 (0)20 7946 0958").
 */
export const findE164: Finder = (s, from) => {
  for (let plus = s.indexOf('+', from); plus >= 0; plus = s.indexOf('+', plus + 1)) {
    const c = s.charCodeAt(plus + 1);
    if (c < 0x31 || c > 0x39) continue;
    let end = plus + 2;
    let steps = 0;
    for (let next = e164StepEnd(s, end); next >= 0 && steps < 14; next = e164StepEnd(s, end)) {
      end = next;
      steps++;
    }
    if (steps >= 7) {
      matchEnd = end;
      return plus;
    }
  }
  return -1;
};

function threeDigitsAt(s: string, i: number): boolean {
  return isDigit(s.charCodeAt(i)) && isDigit(s.charCodeAt(i + 1)) && isDigit(s.charCodeAt(i + 2));
}

/** The end of `\d{3}[ .\-]\d{4}` at `i`, or -1. */
function nanpLineEnd(s: string, i: number): number {
  return threeDigitsAt(s, i) &&
    isPhoneSeparator(s.charCodeAt(i + 3)) &&
    isDigit(s.charCodeAt(i + 4)) &&
    threeDigitsAt(s, i + 5)
    ? i + 8
    : -1;
}

/** The end of `(?:\(\d{3}\)[ .\-]?|\d{3}[ .\-])\d{3}[ .\-]\d{4}` at `i`, or -1. */
function nanpAreaEnd(s: string, i: number): number {
  if (s.charCodeAt(i) === 0x28) {
    if (!threeDigitsAt(s, i + 1) || s.charCodeAt(i + 4) !== 0x29) return -1;
    const end = isPhoneSeparator(s.charCodeAt(i + 5)) ? nanpLineEnd(s, i + 6) : -1;
    return end >= 0 ? end : nanpLineEnd(s, i + 5);
  }
  return threeDigitsAt(s, i) && isPhoneSeparator(s.charCodeAt(i + 3)) ? nanpLineEnd(s, i + 4) : -1;
}

/**
 * The end of a NANP number at `i`, or -1, trying the regex's alternatives in its order: with the
 * `+1`/`1` prefix (and the separator after it) first, then without.
 */
function nanpEnd(s: string, i: number): number {
  let j = i;
  if (s.charCodeAt(j) === 0x2b) j++;
  if (s.charCodeAt(j) === 0x31) {
    j++;
    const end = isPhoneSeparator(s.charCodeAt(j)) ? nanpAreaEnd(s, j + 1) : -1;
    if (end >= 0) return end;
    const bare = nanpAreaEnd(s, j);
    if (bare >= 0) return bare;
  }
  return nanpAreaEnd(s, i);
}

/**
 * NANP: `(?:\+?1[ .\-]?)?(?:\(\d{3}\)[ .\-]?|\d{3}[ .\-])\d{3}[ .\-]\d{4}`, 3-3-4 with separators,
 * optional +1 / 1 and parentheses around the area code.
 */
export const findNanp: Finder = (s, from) => {
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c !== 0x2b && c !== 0x28 && !isDigit(c)) continue;
    const end = nanpEnd(s, i);
    if (end >= 0) {
      matchEnd = end;
      return i;
    }
  }
  return -1;
};

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
    each(findE164, s, e164Possible, (start, end) => {
      if (gluedBefore(s, start) || gluedAfter(s, end)) return;
      out.push(start, end);
    });
    each(findNanp, s, nanpPossible, (start, end) => {
      if (gluedBefore(s, start) || gluedAfter(s, end)) return;
      let d = digitsOf(s.slice(start, end));
      if (d.length === 11) d = d.slice(1);
      if (d.length !== 10 || d[0]! < '2' || d[3]! < '2') return;
      out.push(start, end);
    });
  },
};

export const SCANNERS: Record<PiiDetector, PiiScanner> = {
  email,
  'us-ssn': usSsn,
  'credit-card': creditCard,
  phone,
};
