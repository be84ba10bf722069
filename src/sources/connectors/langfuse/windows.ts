/**
 * The listing windows. Langfuse lists observations newest first (start time DESC, fixed), while
 * the manager wants a query's traces oldest first and commits its watermark after every page. So
 * the connector walks the query [fromMs, toMs) in start-time windows, oldest first, and answers
 * one window per page (all of its root observations, sorted ascending): a page never holds a
 * trace older than one not yet listed.
 *
 * - The first window is one hour. An empty window doubles the next (up to one week), so a long,
 *   quiet backfill takes few requests; after a window with traces the next is at most an hour,
 *   and a sparse one (at most half a page) doubles up to that hour again.
 * - A window with more root observations than a page shrinks before anything is answered: to
 *   0.8 × the span its newest page covered (at most half the window, at least 1 ms), and is asked
 *   again. A 1 ms window that still overflows is answered page by page with Langfuse's cursor
 *   (all of its traces start in the same millisecond, so their order does not matter).
 *
 * The page token carries the state: the query it belongs to, the next window's start and width,
 * and Langfuse's cursor inside a dense 1 ms window.
 */

export const HOUR_MS = 3_600_000;
export const WEEK_MS = 7 * 24 * HOUR_MS;
export const MIN_WINDOW_MS = 1;

export interface WindowState {
  /** Start of the next window, epoch ms (inclusive). */
  start: number;
  /** Its width in ms (the window ends at min(start + width, toMs)). */
  width: number;
  /** Langfuse's cursor inside a dense 1 ms window. */
  cursor?: string;
}

interface TokenBody {
  v: 1;
  f: number;
  t: number;
  s: number;
  w: number;
  c?: string;
}

export function firstWindow(fromMs: number): WindowState {
  return { start: fromMs, width: HOUR_MS };
}

export function windowEnd(state: WindowState, toMs: number): number {
  return Math.min(state.start + state.width, toMs);
}

export function encodeToken(query: { fromMs: number; toMs: number }, state: WindowState): string {
  const body: TokenBody = { v: 1, f: query.fromMs, t: query.toMs, s: state.start, w: state.width };
  if (state.cursor !== undefined) body.c = state.cursor;
  return Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

/** The state in a token of this query; undefined when it is malformed or another query's. */
export function decodeToken(
  token: string,
  query: { fromMs: number; toMs: number },
): WindowState | undefined {
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as Partial<TokenBody>;
  const ints = [b.f, b.t, b.s, b.w].every((n) => typeof n === 'number' && Number.isSafeInteger(n));
  if (b.v !== 1 || !ints || b.f !== query.fromMs || b.t !== query.toMs) return undefined;
  const start = b.s as number;
  const width = b.w as number;
  if (start < query.fromMs || start >= query.toMs) return undefined;
  if (width < MIN_WINDOW_MS || width > WEEK_MS) return undefined;
  if (b.c !== undefined && (typeof b.c !== 'string' || b.c === '')) return undefined;
  return { start, width, ...(b.c === undefined ? {} : { cursor: b.c }) };
}

/** The width after a window that fit in one page and held `roots` root observations. */
export function widthAfter(width: number, roots: number, pageSize: number): number {
  if (roots === 0) return Math.min(width * 2, WEEK_MS);
  if (roots <= pageSize / 2) return Math.min(width * 2, HOUR_MS);
  return Math.min(width, HOUR_MS);
}

/**
 * The width to ask again with after the window [start, end) overflowed a page whose oldest root
 * started at `oldestMs` (so [oldestMs, end) alone holds a page).
 */
export function shrunkWidth(start: number, end: number, oldestMs: number): number {
  const half = Math.floor((end - start) / 2);
  const dense = Math.floor(0.8 * Math.max(0, end - oldestMs));
  return Math.max(MIN_WINDOW_MS, Math.min(half, dense));
}
