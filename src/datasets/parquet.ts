import type { parquetMetadata } from 'hyparquet';
import type { parquetHeader } from 'hyparquet/src/column.js';
import { isTouchstoneError, onDemand } from '../core/index.js';
import { DatasetErrors } from './error-codes.js';
import type { DatasetLimits } from './limits.js';
import type { RowLocation } from './rows.js';

type FileMetaData = ReturnType<typeof parquetMetadata>;

/** The reader and its codecs (about 1 MB of heap), loaded at the first Parquet upload. */
const loadReader = onDemand(async () => {
  const [{ parquetMetadata, parquetReadObjects }, { parquetHeader }, { compressors }] =
    await Promise.all([
      import('hyparquet'),
      import('hyparquet/src/column.js'),
      import('hyparquet-compressors'),
    ]);
  return { parquetMetadata, parquetReadObjects, parquetHeader, compressors };
});

const MAGIC = [0x50, 0x41, 0x52, 0x31]; // "PAR1"

/** True when the bytes start and end with the Parquet magic. */
export function looksLikeParquet(body: Uint8Array): boolean {
  if (body.length < 12) return false;
  return MAGIC.every((b, i) => body[i] === b && body[body.length - 4 + i] === b);
}

function notParquet(why: string) {
  return DatasetErrors.DATASET_FORMAT_INVALID(`the file is not a readable Parquet file: ${why}`);
}

/** An ArrayBuffer holding exactly these bytes (hyparquet reads from offset 0 of it). */
function exactBuffer(body: Uint8Array): ArrayBuffer {
  if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength) {
    return body.buffer as ArrayBuffer;
  }
  // A copy: Buffer's slice() is a view of its (pooled) memory, not a copy.
  return new Uint8Array(body).buffer as ArrayBuffer;
}

function columnName(path: readonly string[] | undefined): string {
  return JSON.stringify((path ?? []).join('.').slice(0, 64));
}

/**
 * The schema's top-level fields: name → whether it is a leaf (not a group). Walks the flat
 * schema list without recursion; a list shorter than its counts, or a name used twice, is not
 * a Parquet file.
 */
function topLevelFields(metadata: FileMetaData): Map<string, boolean> {
  const schema = metadata.schema;
  const fields = new Map<string, boolean>();
  let i = 1;
  for (let c = 0; c < (schema[0]?.num_children ?? 0); c++) {
    const field = schema[i++];
    if (field === undefined) throw notParquet('the schema lists fewer fields than it counts');
    if (fields.has(field.name))
      throw notParquet(`two fields are named ${columnName([field.name])}`);
    fields.set(field.name, !field.num_children);
    for (let pending = field.num_children ?? 0; pending > 0; pending--) {
      const inner = schema[i++];
      if (inner === undefined) throw notParquet('the schema lists fewer fields than it counts');
      pending += inner.num_children ?? 0;
    }
  }
  return fields;
}

/**
 * Walks every column chunk and page header before anything is decompressed: a chunk the schema
 * does not name is refused (the reader would never wait for it, and its failure would escape as
 * an unhandled rejection, which ends the process); a page over `maxPageBytes` (compressed or
 * uncompressed) is refused, and so is a file whose pages decompress to more than
 * `maxNormalizedBytes` in all, which bounds the memory a small, highly compressed file can make
 * the reader allocate.
 */
function checkPages(
  view: DataView,
  metadata: FileMetaData,
  limits: DatasetLimits,
  readHeader: typeof parquetHeader,
): void {
  const fields = topLevelFields(metadata);
  let total = 0;
  for (const [g, group] of metadata.row_groups.entries()) {
    const leaves = new Set<string>();
    for (const chunk of group.columns) {
      const meta = chunk.meta_data;
      if (chunk.file_path !== undefined || meta === undefined) {
        throw notParquet(`row group ${g} refers to column data in another file`);
      }
      const column = columnName(meta.path_in_schema);
      const top = meta.path_in_schema[0] ?? '';
      const leaf = fields.get(top);
      if (leaf === undefined || (leaf && (meta.path_in_schema.length !== 1 || leaves.has(top)))) {
        throw notParquet(`row group ${g}, column ${column}: not a column of the schema`);
      }
      if (leaf) leaves.add(top);
      let offset = Number(meta.dictionary_page_offset ?? meta.data_page_offset);
      const end = offset + Number(meta.total_compressed_size);
      if (!(offset >= 4 && end <= view.byteLength - 8 && offset <= end)) {
        throw notParquet(`row group ${g}, column ${column}: column chunk outside the file`);
      }
      while (offset < end) {
        const reader = { view, offset };
        let header: ReturnType<typeof parquetHeader>;
        try {
          header = readHeader(reader);
        } catch {
          throw notParquet(`row group ${g}, column ${column}: unreadable page header`);
        }
        const compressed = header.compressed_page_size;
        const uncompressed = header.uncompressed_page_size;
        if (
          !Number.isSafeInteger(compressed) ||
          !Number.isSafeInteger(uncompressed) ||
          compressed < 0 ||
          uncompressed < 0 ||
          reader.offset + compressed > end
        ) {
          throw notParquet(`row group ${g}, column ${column}: page sizes outside the column chunk`);
        }
        const largest = Math.max(compressed, uncompressed);
        if (largest > limits.maxPageBytes) {
          throw DatasetErrors.DATASET_PAGE_TOO_LARGE(
            `row group ${g}, column ${column} has a page of ${largest} bytes; the limit per Parquet page is ${limits.maxPageBytes} bytes`,
          );
        }
        total += uncompressed;
        if (total > limits.maxNormalizedBytes) {
          throw DatasetErrors.DATASET_TOO_LARGE(
            `the Parquet pages decompress to more than ${limits.maxNormalizedBytes} bytes, over the limit of the normalized dataset`,
          );
        }
        offset = reader.offset + compressed;
      }
    }
  }
}

/**
 * The rows of a Parquet file as objects (one per row, columns as fields), a row group at a time.
 * Values keep hyparquet's types (bigint, Date, Uint8Array for unannotated binary); the row
 * mapper turns them into JSON or refuses them.
 */
export async function* parquetRows(
  body: Uint8Array,
  limits: DatasetLimits,
): AsyncGenerator<{ at: RowLocation; value: unknown }> {
  if (!looksLikeParquet(body)) throw notParquet('it does not start and end with "PAR1"');
  const { parquetMetadata, parquetReadObjects, parquetHeader, compressors } = await loadReader();
  const file = exactBuffer(body);
  let metadata: FileMetaData;
  try {
    metadata = parquetMetadata(file);
  } catch {
    throw notParquet('the footer (file metadata) cannot be decoded');
  }
  const rows = Number(metadata.num_rows);
  if (rows > limits.maxRecords) {
    throw DatasetErrors.DATASET_TOO_MANY_RECORDS(
      `the file has ${rows} rows; the limit is ${limits.maxRecords} records per dataset`,
    );
  }
  checkPages(new DataView(file), metadata, limits, parquetHeader);
  let start = 0;
  for (const [g, group] of metadata.row_groups.entries()) {
    const count = Number(group.num_rows);
    let objects: Record<string, unknown>[];
    try {
      objects = await parquetReadObjects({
        file,
        metadata,
        compressors,
        rowStart: start,
        rowEnd: start + count,
        // Unannotated binary stays binary, so it is refused rather than guessed at as text.
        utf8: false,
      });
    } catch (err) {
      if (isTouchstoneError(err)) throw err;
      throw notParquet(`row group ${g} cannot be decoded`);
    }
    for (const [i, value] of objects.entries()) {
      const row = start + i;
      yield { at: { label: `row ${row}`, path: `rows[${row}]` }, value };
    }
    start += count;
  }
}
