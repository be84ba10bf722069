import {
  type ErrorDetail,
  type EvalRecord,
  formatPath,
  issuesToDetails,
  RecordSchema,
} from '../core/index.js';

/**
 * One dataset row → one Record (without its final id). Rows come from JSON Lines (plain JSON
 * values) or Parquet (hyparquet's values: bigint, Date, binary, typed arrays); both are brought
 * to plain JSON first, then mapped field by field and checked with the Record schema. Problems
 * name the row and the field path, never a value.
 */

/** Where a row sits in its file, as errors name it. */
export interface RowLocation {
  /** `line 7` (JSON Lines, 1-based) or `row 6` (Parquet, 0-based row index). */
  label: string;
  /** Prefix of detail paths: `lines[7]` or `rows[6]`. */
  path: string;
}

/** A row field → the Record field it fills. Documented in docs/datasets.md. */
export const FIELD_ALIASES: Readonly<Record<string, keyof EvalRecord>> = {
  id: 'id',
  input: 'input',
  inputs: 'input',
  question: 'input',
  messages: 'input',
  output: 'output',
  outputs: 'output',
  answer: 'output',
  response: 'output',
  reference: 'reference',
  expected: 'reference',
  expected_output: 'reference',
  expectedOutput: 'reference',
  ground_truth: 'reference',
  context: 'context',
  contexts: 'context',
  metadata: 'metadata',
  labels: 'labels',
  trajectory: 'trajectory',
  usage: 'usage',
};

/** Field names are the uploader's text too: shown quoted, cut, never as a raw value. */
function fieldName(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
}

/**
 * Brings a Parquet value to plain JSON: integers beyond ±2^53 and binary values are problems
 * (they have no faithful JSON form), timestamps become RFC 3339 strings.
 */
export function toPlainJson(
  value: unknown,
  path: string,
  problems: ErrorDetail[],
  depth = 0,
): unknown {
  if (depth > 64) {
    problems.push({ path, message: 'nested deeper than 64 levels' });
    return undefined;
  }
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return value;
    problems.push({ path, message: 'not a finite number (NaN and Infinity have no JSON form)' });
    return undefined;
  }
  if (typeof value === 'bigint') {
    if (value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)) {
      return Number(value);
    }
    problems.push({ path, message: 'integer outside ±2^53; store it as a string' });
    return undefined;
  }
  if (value instanceof Date) {
    if (!Number.isNaN(value.getTime())) return value.toISOString();
    problems.push({ path, message: 'invalid timestamp' });
    return undefined;
  }
  if (value instanceof Uint8Array || value instanceof ArrayBuffer || value instanceof DataView) {
    problems.push({ path, message: 'binary value; store text (a UTF-8 string column) or JSON' });
    return undefined;
  }
  if (ArrayBuffer.isView(value)) {
    return Array.from(value as unknown as ArrayLike<unknown>, (v, i) =>
      toPlainJson(v, `${path}[${i}]`, problems, depth + 1),
    );
  }
  if (Array.isArray(value)) {
    return value.map((v, i) => toPlainJson(v, `${path}[${i}]`, problems, depth + 1));
  }
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of value) {
      if (typeof k !== 'string') {
        problems.push({ path, message: 'map with non-string keys' });
        return undefined;
      }
      out[k] = toPlainJson(v, `${path}.${k}`, problems, depth + 1);
    }
    return out;
  }
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = toPlainJson(v, `${path}.${k}`, problems, depth + 1);
    }
    return out;
  }
  problems.push({ path, message: `unsupported value type (${typeof value})` });
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The result of one row: the Record (id still optional) or the row's problems. */
export type RowResult =
  | { ok: true; record: Omit<EvalRecord, 'id'> & { id?: string } }
  | { ok: false; problems: ErrorDetail[] };

/**
 * Maps one row (plain JSON) to a Record. Null fields count as absent (Parquet's missing values);
 * `id` may be a string or an integer; `context` may be one string; label values may be numbers
 * or booleans (kept as their text).
 */
export function rowToRecord(row: unknown, at: RowLocation): RowResult {
  if (!isPlainObject(row)) {
    const what = Array.isArray(row) ? 'an array' : row === null ? 'null' : `a ${typeof row}`;
    return {
      ok: false,
      problems: [{ path: at.path, message: `is ${what}, not a Record object` }],
    };
  }
  const problems: ErrorDetail[] = [];
  const candidate: Record<string, unknown> = {};
  const from: Record<string, string> = {};
  for (const [key, raw] of Object.entries(row)) {
    const target = Object.hasOwn(FIELD_ALIASES, key) ? FIELD_ALIASES[key] : undefined;
    if (target === undefined) {
      problems.push({
        path: formatPath(at.path, [key]),
        message: `unknown field ${fieldName(key)}; see docs/datasets.md for the accepted fields`,
      });
      continue;
    }
    if (raw === null || raw === undefined) continue;
    const earlier = from[target];
    if (earlier !== undefined) {
      problems.push({
        path: formatPath(at.path, [key]),
        message: `fields ${fieldName(earlier)} and ${fieldName(key)} both set ${target}; give one`,
      });
      continue;
    }
    from[target] = key;
    candidate[target] = raw;
  }

  const id = candidate.id;
  if (id !== undefined) {
    if (typeof id === 'number' && Number.isSafeInteger(id)) candidate.id = String(id);
    else if (typeof id !== 'string') {
      problems.push({
        path: formatPath(at.path, [from.id ?? 'id']),
        message: 'must be a string or an integer',
      });
      delete candidate.id;
    }
  }
  if (typeof candidate.context === 'string') candidate.context = [candidate.context];
  const labels = candidate.labels;
  if (isPlainObject(labels)) {
    const text: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(labels)) {
      text[k] = typeof v === 'number' || typeof v === 'boolean' ? String(v) : v;
    }
    candidate.labels = text;
  }

  const parsed = RecordSchema.safeParse(candidate);
  if (!parsed.success) {
    for (const detail of issuesToDetails(parsed.error.issues, at.path)) {
      // Report the field by the name the row used (`expected`, not `reference`).
      const field = detail.path.slice(at.path.length + 1).split(/[.[]/)[0] ?? '';
      const used = from[field];
      problems.push(
        used === undefined || used === field
          ? detail
          : {
              path: `${at.path}.${used}${detail.path.slice(at.path.length + 1 + field.length)}`,
              message: detail.message,
            },
      );
    }
  }
  if (problems.length > 0 || !parsed.success) return { ok: false, problems };
  return { ok: true, record: parsed.data };
}
