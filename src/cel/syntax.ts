/**
 * What is checked of an expression's text before and around the parser: bracket depth (the
 * parser's time grows with it), line and column of an offset, and syntax errors cut to a short
 * text.
 */
import { MAX_BRACKET_DEPTH } from './types.js';

/** `line L, column C` of an offset; the parser places operators on the blank before them. */
export function lineColumn(source: string, offset: number): string {
  let line = 1;
  let lineStart = 0;
  let end = Math.min(Math.max(offset, 0), source.length);
  while (end < source.length && /\s/.test(source[end]!)) end++;
  if (end === source.length) end = Math.min(Math.max(offset, 0), source.length);
  for (let i = 0; i < end; i++) {
    if (source.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return `line ${line}, column ${end - lineStart + 1}`;
}

/**
 * The offset where bracket nesting first exceeds the limit, or -1. Skips string literals and
 * comments roughly as CEL lexes them; an unterminated string ends the scan (the parser reports it).
 */
export function deepBracket(source: string): number {
  let depth = 0;
  let i = 0;
  const n = source.length;
  while (i < n) {
    const ch = source[i]!;
    if (ch === '/' && source[i + 1] === '/') {
      const eol = source.indexOf('\n', i);
      if (eol < 0) return -1;
      i = eol + 1;
    } else if (ch === '"' || ch === "'") {
      const raw = i > 0 && (source[i - 1] === 'r' || source[i - 1] === 'R');
      const quote = source.startsWith(ch.repeat(3), i) ? ch.repeat(3) : ch;
      let j = i + quote.length;
      while (j < n && !source.startsWith(quote, j)) {
        if (!raw && source[j] === '\\') j++;
        if (quote.length === 1 && source[j] === '\n') return -1;
        j++;
      }
      if (j >= n) return -1;
      i = j + quote.length;
    } else {
      if (ch === '(' || ch === '[' || ch === '{') {
        if (++depth > MAX_BRACKET_DEPTH) return i;
      } else if (ch === ')' || ch === ']' || ch === '}') {
        depth--;
      }
      i++;
    }
  }
  return -1;
}

interface ParseFailure {
  message?: unknown;
  location?: { start?: { offset?: number } };
}

export function syntaxProblem(source: string, err: unknown): string {
  if (err instanceof RangeError) return 'line 1, column 1: expression nests too deeply';
  const e = (typeof err === 'object' && err !== null ? err : {}) as ParseFailure;
  const offset = e.location?.start?.offset ?? 0;
  const what = unexpectedToken(typeof e.message === 'string' ? e.message : '');
  return `${lineColumn(source, offset)}: syntax error${what}`;
}

/**
 * ` (unexpected X)` from the parser's "… found X but expecting …", X cut to 40 characters; found
 * with indexOf, since a lazy regex over the message rescans it from every `found`.
 */
function unexpectedToken(message: string): string {
  const start = message.indexOf('found ');
  if (start < 0) return '';
  const end = message.indexOf(' but expecting', start + 6);
  if (end <= start + 6) return '';
  return ` (unexpected ${message.slice(start + 6, end).slice(0, 40)})`;
}
