/**
 * The size of the program RE2 compiles a pattern to, estimated from the pattern's text: what
 * `matches` is charged by (cost.ts), since RE2 is linear in the text only up to that factor.
 */
/** What a character class or `.` costs: a range test over UTF-8 bytes is several instructions. */
const CLASS_SIZE = 8;
/** `\pL` and friends compile to hundreds of byte ranges. */
const UNICODE_CLASS_SIZE = 128;
/** RE2 refuses programs beyond its memory limit (8 MiB by default) near this size. */
export const MAX_PROGRAM_SIZE = 500_000;
/** RE2 refuses patterns nested deeper than this; the scan stops there too (it recurses). */
const MAX_PATTERN_DEPTH = 1000;

const programSizes = new Map<string, number>();

/**
 * An upper estimate of the size of the program RE2 compiles a pattern to: atoms, with counted
 * repetitions multiplying what they repeat (`x{2,50}` is 50 copies). An invalid pattern gets an
 * estimate too; RE2 refuses it when it runs.
 */
export function programSize(pattern: string): number {
  let size = programSizes.get(pattern);
  if (size === undefined) {
    size = Math.min(new PatternScan(pattern).alternation(), MAX_PROGRAM_SIZE);
    if (programSizes.size >= 256) programSizes.clear();
    programSizes.set(pattern, size);
  }
  return size;
}

class PatternScan {
  private i = 0;
  private depth = 0;
  constructor(private readonly p: string) {}

  alternation(): number {
    if (++this.depth > MAX_PATTERN_DEPTH) return MAX_PROGRAM_SIZE;
    let size = this.sequence();
    while (this.p[this.i] === '|') {
      this.i++;
      size += this.sequence() + 1;
    }
    this.depth--;
    return size;
  }

  private sequence(): number {
    let size = 0;
    while (this.i < this.p.length && this.p[this.i] !== '|' && this.p[this.i] !== ')') {
      size += this.repeated(this.atom());
      if (size > MAX_PROGRAM_SIZE) return size;
    }
    return size;
  }

  private atom(): number {
    const p = this.p;
    const c = p[this.i++];
    if (c === '(') {
      if (p[this.i] === '?') {
        while (this.i < p.length && !':)>'.includes(p[this.i] as string)) this.i++;
        // `(?i)` sets flags and matches nothing; `(?P<name>…)` and `(?:…)` group.
        if (p[this.i] === ')') {
          this.i++;
          return 0;
        }
        this.i++;
      }
      const inner = this.alternation();
      if (p[this.i] === ')') this.i++;
      return inner + 1;
    }
    if (c === '[') {
      if (p[this.i] === '^') this.i++;
      if (p[this.i] === ']') this.i++;
      while (this.i < p.length && p[this.i] !== ']') {
        if (p[this.i] === '\\') this.i++;
        else if (p.startsWith('[:', this.i)) this.i = Math.max(p.indexOf(':]', this.i + 2), this.i);
        this.i++;
      }
      this.i++;
      return CLASS_SIZE;
    }
    if (c === '\\') return this.escape();
    return c === '.' ? CLASS_SIZE : 1;
  }

  private escape(): number {
    const p = this.p;
    const c = p[this.i++];
    if (c === 'p' || c === 'P') {
      if (p[this.i] === '{')
        this.i = p.indexOf('}', this.i) < 0 ? p.length : p.indexOf('}', this.i) + 1;
      else this.i++;
      return UNICODE_CLASS_SIZE;
    }
    if (c === 'Q') {
      const end = p.indexOf('\\E', this.i);
      const literal = (end < 0 ? p.length : end) - this.i;
      this.i = end < 0 ? p.length : end + 2;
      return literal;
    }
    return c !== undefined && 'dDwWsS'.includes(c) ? CLASS_SIZE : 1;
  }

  /** Applies the quantifiers after an atom of this size. */
  private repeated(size: number): number {
    const p = this.p;
    for (;;) {
      const c = p[this.i];
      if (c === '*' || c === '+' || c === '?') {
        this.i++;
        size += 1;
      } else if (c === '{') {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(this.i, this.i + 16));
        if (m === null) return size;
        this.i += m[0].length;
        const min = Number(m[1]);
        const max = m[2] === undefined ? min : m[3] === '' ? min + 1 : Number(m[3]);
        size = Math.max(min, max, 1) * (size + 1);
      } else return size;
      if (p[this.i] === '?') this.i++;
      if (size > MAX_PROGRAM_SIZE) return size;
    }
  }
}
