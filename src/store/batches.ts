import type { StoreDialect } from './ports.js';

/** Rows per SQLite statement at most; a power of two (see `batches`). */
const SQLITE_GROUP = 128;

/**
 * Splits rows into the groups each multi-row statement takes. PostgreSQL: up to `max` rows per
 * statement (each statement is a round trip). SQLite: groups of 128, then the binary digits of the
 * remainder (64, 32, …, 1), so the connection's statement cache holds one compiled statement per
 * size instead of compiling a new one for every row count (compiling a 512-row, 8-column INSERT
 * cost about 3 ms; running it, less).
 */
export function* batches<T>(
  dialect: StoreDialect,
  rows: readonly T[],
  max: number,
): Generator<readonly T[]> {
  if (dialect === 'postgres') {
    for (let i = 0; i < rows.length; i += max) yield rows.slice(i, i + max);
    return;
  }
  let i = 0;
  let group = Math.min(SQLITE_GROUP, max);
  while (i < rows.length) {
    while (group > 1 && rows.length - i < group) group >>= 1;
    yield rows.slice(i, i + group);
    i += group;
  }
}

const built = new Map<string, string>();

/**
 * The VALUES rows of a multi-row statement, `rows` times `row`'s text, each parameter written by
 * the `param` it is given (`?` on SQLite, `$1`, `$2`, … across rows on PostgreSQL); built once per
 * dialect, row count and `shape` (which names `row`).
 */
export function valuesOf(
  dialect: StoreDialect,
  rows: number,
  shape: string,
  row: (param: () => string) => string,
): string {
  const key = `${dialect} ${rows} ${shape}`;
  let text = built.get(key);
  if (text === undefined) {
    let n = 0;
    const param = dialect === 'postgres' ? () => `$${++n}` : () => '?';
    text = Array.from({ length: rows }, () => row(param)).join(', ');
    built.set(key, text);
  }
  return text;
}

/** `(?, ?), (?, ?)` on SQLite, `($1, $2), ($3, $4)` on PostgreSQL (built once per shape). */
export function placeholders(dialect: StoreDialect, rows: number, columns: number): string {
  return valuesOf(
    dialect,
    rows,
    String(columns),
    (param) => `(${Array.from({ length: columns }, param).join(', ')})`,
  );
}
