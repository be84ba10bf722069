/**
 * The size of every tool result. Clients refuse large tool results (Claude Code: 25,000 tokens by
 * default, with a warning near 10,000), and a refused answer teaches the model nothing, so a
 * result over its budget is trimmed instead: long strings are cut with a marker giving their
 * length, then the longest lists are shortened, and what was left out is said in `truncated`
 * with the argument that fetches more. docs/mcp.md
 */

/** Characters of compact JSON a result may use by default (about 6k tokens). */
export const RESULT_BUDGET_CHARS = 24_000;
/** No result is ever longer (about 20k tokens, under the 25k default of clients). */
export const RESULT_HARD_CAP_CHARS = 80_000;
/** Characters a string keeps when a tool gives no field limit of its own. */
export const DEFAULT_FIELD_CHARS = 2_000;

/** Cuts shorter than this are not worth making: the marker itself is about 30 characters. */
const MIN_FIELD_CHARS = 64;
/** Lists are halved at most this many times before strings are cut harder. */
const MAX_LIST_CUTS = 64;

export interface Truncation {
  /** Strings cut to the field limit; each ends with `…[cut: N chars]`. */
  strings_cut: number;
  /** Lists shortened to fit the budget: where, how many items kept, how many there were. */
  lists?: { path: string; kept: number; total: number }[];
  /** How to see what was left out. */
  hint: string;
}

/** A string over `max` characters, cut and marked with its full length. */
export function cutString(s: string, max: number): { text: string; cut: boolean } {
  if (s.length <= max) return { text: s, cut: false };
  return { text: `${s.slice(0, max)}…[cut: ${s.length} chars]`, cut: true };
}

interface Walk {
  cut: number;
}

function cutStrings(value: unknown, max: number, walk: Walk): unknown {
  if (typeof value === 'string') {
    const { text, cut } = cutString(value, max);
    if (cut) walk.cut += 1;
    return text;
  }
  if (Array.isArray(value)) return value.map((v) => cutStrings(v, max, walk));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = cutStrings(v, max, walk);
    return out;
  }
  return value;
}

/** The longest list (by its JSON) in a value, with its path; undefined when none has 2 items. */
function longestList(
  value: unknown,
  path: string,
): { path: string; list: unknown[]; size: number } | undefined {
  let best: { path: string; list: unknown[]; size: number } | undefined;
  const consider = (c: { path: string; list: unknown[]; size: number } | undefined) => {
    if (c !== undefined && (best === undefined || c.size > best.size)) best = c;
  };
  if (Array.isArray(value)) {
    if (value.length > 1) consider({ path, list: value, size: JSON.stringify(value).length });
    for (const [i, v] of value.entries()) consider(longestList(v, `${path}[${i}]`));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value))
      consider(longestList(v, path === '' ? k : `${path}.${k}`));
  }
  return best;
}

export interface Bounded {
  /** The compact JSON text the client gets. */
  text: string;
  truncated?: Truncation;
}

/**
 * `value` as compact JSON within `budget` characters (at most RESULT_HARD_CAP_CHARS): strings cut
 * to `fieldChars`, then the longest lists halved (keeping their first items), then strings cut
 * harder. `hint` tells the model how to get the rest (a smaller page, `step_offset`, ...).
 */
export function bound(
  value: Record<string, unknown>,
  options: { budget?: number; fieldChars?: number; hint: string },
): Bounded {
  const budget = Math.min(options.budget ?? RESULT_BUDGET_CHARS, RESULT_HARD_CAP_CHARS);
  const walk: Walk = { cut: 0 };
  let fieldChars = options.fieldChars ?? DEFAULT_FIELD_CHARS;
  let current = cutStrings(value, fieldChars, walk) as Record<string, unknown>;
  const lists: { path: string; kept: number; total: number }[] = [];
  const withNote = () =>
    walk.cut === 0 && lists.length === 0
      ? current
      : {
          ...current,
          truncated: {
            strings_cut: walk.cut,
            ...(lists.length === 0 ? {} : { lists }),
            hint: options.hint,
          } satisfies Truncation,
        };
  let text = JSON.stringify(withNote());
  for (let i = 0; text.length > budget && i < MAX_LIST_CUTS; i++) {
    const longest = longestList(current, '');
    if (longest === undefined) break;
    const total = lists.find((l) => l.path === longest.path)?.total ?? longest.list.length;
    longest.list.splice(Math.ceil(longest.list.length / 2));
    const known = lists.find((l) => l.path === longest.path);
    if (known === undefined) lists.push({ path: longest.path, kept: longest.list.length, total });
    else known.kept = longest.list.length;
    text = JSON.stringify(withNote());
  }
  while (text.length > budget && fieldChars > MIN_FIELD_CHARS) {
    fieldChars = Math.max(MIN_FIELD_CHARS, Math.floor(fieldChars / 4));
    current = cutStrings(current, fieldChars, walk) as Record<string, unknown>;
    text = JSON.stringify(withNote());
  }
  if (text.length > budget) {
    // Only keys are left (a map of thousands of entries): say so rather than send it.
    const note: Truncation = { strings_cut: walk.cut, hint: options.hint };
    return {
      text: JSON.stringify({ truncated: note, error: 'the result does not fit the size budget' }),
      truncated: note,
    };
  }
  const note = (withNote() as { truncated?: Truncation }).truncated;
  return note === undefined ? { text } : { text, truncated: note };
}
