import { createHash } from 'node:crypto';
import type { ErrorDetail } from '../core/index.js';
import { DatasetErrors } from './error-codes.js';
import { jsonlRows } from './jsonl.js';
import type { DatasetLimits } from './limits.js';
import { looksLikeParquet, parquetRows } from './parquet.js';
import { type RowLocation, rowToRecord, toPlainJson } from './rows.js';

export const DATASET_FORMATS = ['jsonl', 'parquet'] as const;
export type DatasetFormat = (typeof DATASET_FORMATS)[number];

/** A dataset converted to JSON Lines of Records, ready to publish. */
export interface NormalizedDataset {
  /** One Record per line, each with its id. */
  bytes: Buffer;
  records: number;
  /** Hex SHA-256 of `bytes`. */
  sha256: string;
}

/** Rows whose problems are listed in an error; the rest are counted. */
const MAX_REPORTED_ROWS = 20;
/** Rows converted between two yields to the event loop, so other requests keep being served. */
const ROWS_PER_SLICE = 2000;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The format of a body with none given: Parquet when it carries the Parquet magic. */
export function sniffFormat(body: Uint8Array): DatasetFormat {
  return looksLikeParquet(body) ? 'parquet' : 'jsonl';
}

/**
 * Converts a JSON Lines or Parquet file to JSON Lines of Records. Every row must map to a Record;
 * any invalid row, duplicate id or limit breach rejects the whole file, with up to 20 rows'
 * problems in `details`. Rows without an `id` get their 1-based position among the records.
 */
export async function normalizeDataset(
  body: Uint8Array,
  format: DatasetFormat,
  limits: DatasetLimits,
): Promise<NormalizedDataset> {
  if (body.length > limits.maxUploadBytes) {
    throw DatasetErrors.DATASET_TOO_LARGE(
      `the file has ${body.length} bytes; the upload limit is ${limits.maxUploadBytes} bytes`,
    );
  }
  const problems: ErrorDetail[] = [];
  const badRows = new Set<string>();
  let duplicatesOnly = true;
  const seen = new Map<string, string>();
  const chunks: Buffer[] = [];
  let bytes = 0;
  let records = 0;
  const hash = createHash('sha256');

  let firstText = '';
  const fail = (at: RowLocation, rowProblems: ErrorDetail[], duplicate = false) => {
    if (!duplicate) duplicatesOnly = false;
    const p = rowProblems[0];
    if (firstText === '' && p !== undefined) {
      const field = p.path.slice(at.path.length).replace(/^\./, '');
      firstText = `${at.label}${field === '' ? '' : `, field ${field}`}: ${p.message}`;
    }
    badRows.add(at.label);
    if (badRows.size <= MAX_REPORTED_ROWS) problems.push(...rowProblems);
    return badRows.size > MAX_REPORTED_ROWS;
  };

  const accept = (at: RowLocation, value: unknown, plain: boolean): boolean => {
    records++;
    if (records > limits.maxRecords) {
      throw DatasetErrors.DATASET_TOO_MANY_RECORDS(
        `${at.label} is record ${records}; the limit is ${limits.maxRecords} records per dataset`,
      );
    }
    let row = value;
    if (!plain) {
      const conversion: ErrorDetail[] = [];
      row = toPlainJson(value, at.path, conversion);
      if (conversion.length > 0) return fail(at, conversion);
    }
    const result = rowToRecord(row, at);
    if (!result.ok) return fail(at, result.problems);
    const id = result.record.id ?? String(records);
    const first = seen.get(id);
    if (first !== undefined) {
      return fail(
        at,
        [
          {
            path: `${at.path}.id`,
            message: `duplicates the id of ${first} (rows without an id are numbered 1, 2, … by position)`,
          },
        ],
        true,
      );
    }
    seen.set(id, at.label);
    if (badRows.size > 0) return false;
    let line: string;
    try {
      const { id: _given, ...fields } = result.record;
      line = `${JSON.stringify({ id, ...fields })}\n`;
    } catch {
      return fail(at, [{ path: at.path, message: 'nested too deeply to store' }]);
    }
    const encoded = Buffer.from(line, 'utf8');
    bytes += encoded.length;
    if (bytes > limits.maxNormalizedBytes) {
      throw DatasetErrors.DATASET_TOO_LARGE(
        `the normalized dataset exceeds ${limits.maxNormalizedBytes} bytes at ${at.label}; split the dataset`,
      );
    }
    hash.update(encoded);
    chunks.push(encoded);
    return false;
  };

  let sinceYield = 0;
  let stop = false;
  if (format === 'jsonl') {
    for (const row of jsonlRows(body, limits.maxRowBytes)) {
      stop =
        'problem' in row
          ? fail(row.at, [{ path: row.at.path, message: row.problem }])
          : accept(row.at, row.value, true);
      if (stop) break;
      if (++sinceYield === ROWS_PER_SLICE) {
        sinceYield = 0;
        await yieldToLoop();
      }
    }
  } else {
    for await (const row of parquetRows(body, limits)) {
      stop = accept(row.at, row.value, false);
      if (stop) break;
      if (++sinceYield === ROWS_PER_SLICE) {
        sinceYield = 0;
        await yieldToLoop();
      }
    }
  }

  if (badRows.size > 0) {
    const more = stop
      ? ` (and problems in more than ${MAX_REPORTED_ROWS - 1} other rows; checking stopped)`
      : badRows.size > 1
        ? ` (and problems in ${badRows.size - 1} other row${badRows.size === 2 ? '' : 's'}; see details)`
        : '';
    const factory = duplicatesOnly
      ? DatasetErrors.DATASET_ID_DUPLICATE
      : DatasetErrors.DATASET_ROW_INVALID;
    throw factory(`dataset rejected, nothing was published: ${firstText}${more}`, {
      details: problems,
    });
  }
  if (records === 0) {
    throw DatasetErrors.DATASET_EMPTY('the file holds no records; nothing was published');
  }
  return { bytes: Buffer.concat(chunks, bytes), records, sha256: hash.digest('hex') };
}
