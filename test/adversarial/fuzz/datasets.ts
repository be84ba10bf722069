/**
 * Fuzz target `datasets`: dataset normalization (`normalizeDataset`) on hostile JSON Lines and
 * Parquet files. JSON Lines: valid Record rows mutated as text, bytes and JSON trees, very long
 * lines, deep nesting, invalid UTF-8, duplicate ids, byte order marks and CR line ends, too many
 * rows. Parquet: valid files written with hyparquet-writer, then bit flips, cuts, splices, and
 * rewritten page headers, page sizes, footers and footer lengths.
 *
 * Every string value of a row holds a marker (`mk` + 8 hex digits + `q`). A pass is a normalized
 * dataset that is JSON Lines of Records with distinct ids, or a TouchstoneError with a DATASET_*
 * code whose message and details hold no marker (errors name rows and fields, never values; a
 * field name may be shown, so a marker that a mutation moved into a key does not count). Any
 * other exception is a failure.
 */
import { createHash } from 'node:crypto';
import { parquetMetadata } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { isTouchstoneError, STEP_TYPES } from '../../../src/core/index.js';
import {
  DATASET_LIMITS,
  type DatasetFormat,
  type DatasetLimits,
  normalizeDataset,
} from '../../../src/datasets/index.js';
import type { FuzzTarget, Trial } from './driver.js';
import {
  type ByteOp,
  editTree,
  flipChars,
  type JsonVocabulary,
  mutateBytes,
  splice,
} from './mutate.js';
import { choose, int, MARKER, marker, pick, type Rand, rng, type Way } from './random.js';

interface DatasetInput {
  body: Uint8Array;
  format: DatasetFormat;
  limits: 'small' | 'production';
  how: string;
}

/**
 * Small limits, so the limit paths are reached by small inputs; a quarter of the inputs run with
 * the production ones.
 */
const SMALL_LIMITS: DatasetLimits = {
  ...DATASET_LIMITS,
  maxUploadBytes: 256 * 1024,
  maxNormalizedBytes: 256 * 1024,
  maxRecords: 200,
  maxRowBytes: 16 * 1024,
  maxPageBytes: 16 * 1024,
};

const MARKERS = new RegExp(MARKER.source, 'g');

function text(r: Rand): string {
  const m = marker(r);
  switch (int(r, 5)) {
    case 0:
      return m;
    case 1:
      return `What is ${m}?`;
    case 2:
      return `é日🚀 ${m} \u0000\t"\\`;
    case 3:
      return `${'x'.repeat(int(r, 300))}${m}`;
    default:
      return `${m} and ${marker(r)}`;
  }
}

const maybe = (r: Rand, p: number, value: () => unknown) => (r() < p ? value() : undefined);

/** One valid Record row, its fields under their names or aliases, every string holding a marker. */
function validRow(r: Rand): Record<string, unknown> {
  const iso = () => new Date(1767225600000 + int(r, 1e9)).toISOString();
  const fields: Record<string, unknown> = {
    id: maybe(r, 0.7, () => (r() < 0.8 ? `id-${marker(r)}` : int(r, 1000))),
    [pick(r, ['input', 'inputs', 'question', 'messages'])]: pick(r, [
      () => text(r),
      () => ({ q: text(r), n: int(r, 10) }),
      () => [{ role: 'user', content: text(r) }],
    ])(),
    [pick(r, ['output', 'answer', 'response', 'outputs'])]: maybe(r, 0.8, () => text(r)),
    [pick(r, ['reference', 'expected', 'ground_truth', 'expected_output'])]: maybe(r, 0.6, () =>
      r() < 0.7 ? text(r) : [text(r), text(r)],
    ),
    [pick(r, ['context', 'contexts'])]: maybe(r, 0.3, () => (r() < 0.5 ? text(r) : [text(r)])),
    metadata: maybe(r, 0.5, () => ({ k: text(r), n: int(r, 100), nested: { a: [text(r)] } })),
    labels: maybe(r, 0.4, () => ({ split: text(r), n: String(int(r, 9)) })),
    trajectory: maybe(r, 0.3, () =>
      Array.from({ length: 1 + int(r, 3) }, () => ({
        type: pick(r, STEP_TYPES),
        name: text(r),
        input: text(r),
        output: text(r),
        start: iso(),
        end: iso(),
        usage: { inputTokens: int(r, 1000) },
        attributes: { a: text(r) },
      })),
    ),
    usage: maybe(r, 0.3, () => ({ inputTokens: int(r, 1000), costUsd: r(), latencyMs: 12.5 })),
  };
  for (const k of Object.keys(fields)) if (fields[k] === undefined) delete fields[k];
  return fields;
}

const rows = (r: Rand, n: number) => Array.from({ length: n }, () => validRow(r));

const utf8 = (s: string) => Buffer.from(s, 'utf8');

function jsonl(r: Rand, lines: readonly string[]): Uint8Array {
  const eol = r() < 0.2 ? '\r\n' : '\n';
  const bom = r() < 0.1 ? '\ufeff' : '';
  return utf8(bom + lines.join(eol) + (r() < 0.5 ? eol : ''));
}

// ---- JSON Lines ------------------------------------------------------------------------------

const VOCABULARY: JsonVocabulary = {
  keys: [
    'id',
    'input',
    'question',
    'output',
    'answer',
    'expected',
    'reference',
    'context',
    'metadata',
    'labels',
    'trajectory',
    'usage',
    'provenance',
    'type',
    'name',
    'start',
    'inputTokens',
    '__proto__',
    'constructor',
    'zz',
  ],
  values: [
    null,
    0,
    -1,
    1.5,
    2 ** 53,
    1e308,
    '',
    'tool',
    '2026-01-01T00:00:00Z',
    'not a time',
    true,
    [],
    {},
    [null],
    [{}],
    { type: 'tool' },
    { type: 'nope' },
    { inputTokens: -1 },
    { role: 'user' },
    'x'.repeat(600),
  ],
  deep(n) {
    let v: unknown = 'leaf';
    for (let i = 0; i < n; i++) v = i % 2 === 0 ? [v] : { a: v };
    return v;
  },
  depths: [10, 65, 100, 2000],
  alphabet: '{}[]",:-.0123456789eE abcdefnrtul\\\r\n\u00e9\ufeff\ud83d\ude80',
};

/** Bytes that are not UTF-8: a lone continuation, a cut sequence, an overlong form, a surrogate. */
const INVALID_UTF8 = [[0xff], [0x80], [0xc3], [0xe6, 0x97], [0xc0, 0xaf], [0xed, 0xa0, 0x80]];

const asLines = (all: readonly unknown[]) => all.map((row) => JSON.stringify(row));

const lines = (r: Rand) => asLines(rows(r, 1 + int(r, 6)));

const JSONL_WAYS: readonly Way<{ body: Uint8Array; how: string }>[] = [
  {
    name: 'valid',
    weight: 5,
    make: (r) => ({ body: jsonl(r, lines(r)), how: 'valid' }),
  },
  {
    name: 'structure',
    weight: 20,
    make(r) {
      const all = rows(r, 1 + int(r, 8));
      const how = editTree(r, pick(r, all), VOCABULARY);
      return {
        body: jsonl(r, asLines(all)),
        how,
      };
    },
  },
  {
    name: 'bytes',
    weight: 15,
    make(r) {
      const seeds = [jsonl(r, lines(r)), jsonl(r, lines(r))];
      return mutateBytes(r, seeds[0]!, seeds);
    },
  },
  {
    name: 'chars',
    weight: 10,
    make(r) {
      const file = lines(r).join('\n');
      return { body: utf8(flipChars(r, file, VOCABULARY.alphabet, 1 + int(r, 6))), how: 'chars' };
    },
  },
  {
    name: 'long line',
    weight: 5,
    make(r) {
      // Around the small row limit, or far over it (and under the production one: 4 MiB rows
      // take tens of milliseconds to read, linearly).
      const size = pick(r, [SMALL_LIMITS.maxRowBytes, 100_000]);
      const row = JSON.stringify({ input: `${marker(r)}${'y'.repeat(Math.max(0, size - 40))}` });
      const padded = row.length < size ? row + ' '.repeat(size - row.length + int(r, 3) - 1) : row;
      return { body: jsonl(r, [...lines(r), padded]), how: 'long line' };
    },
  },
  {
    name: 'deep',
    weight: 5,
    make(r) {
      const n = pick(r, [30, 64, 65, 1000, 100_000]);
      const open = r() < 0.5 ? '['.repeat(n) : '{"a":'.repeat(n);
      const close = open.startsWith('[') ? ']'.repeat(n) : '}'.repeat(n);
      const row = `{"input":"${marker(r)}","metadata":{"d":${open}"${marker(r)}"${close}}}`;
      return { body: jsonl(r, [...lines(r), r() < 0.8 ? row : row.slice(0, -n)]), how: 'deep' };
    },
  },
  {
    name: 'invalid utf8',
    weight: 5,
    make(r) {
      const body = jsonl(r, lines(r));
      const at = body.indexOf(0x6d /* m of a marker */, int(r, body.length));
      return {
        body: splice(body, at < 0 ? body.length : at, 0, pick(r, INVALID_UTF8)),
        how: 'invalid utf8',
      };
    },
  },
  {
    name: 'duplicate ids',
    weight: 5,
    make(r) {
      const all = rows(r, 2 + int(r, 6));
      const a = int(r, all.length);
      const b = int(r, all.length);
      switch (int(r, 3)) {
        case 0:
          all[b] = { ...all[b], id: all[a]!.id ?? a + 1 };
          break;
        case 1:
          // A row without an id is numbered by position: a row whose id is that number clashes.
          delete all[a]!.id;
          all[b] = { ...all[b], id: r() < 0.5 ? String(a + 1) : a + 1 };
          break;
        default:
          all.push(all[a]!);
      }
      return {
        body: jsonl(r, asLines(all)),
        how: 'duplicate ids',
      };
    },
  },
  {
    name: 'line ends',
    weight: 5,
    make(r) {
      const parts = lines(r);
      const junk = ['', ' ', '\t', '\r', '\ufeff', '\u0000', '\u2028', '\r\r'];
      const at = int(r, parts.length + 1);
      parts.splice(at, 0, pick(r, junk));
      const body = utf8(
        `${pick(r, ['', '\ufeff', '\ufeff\ufeff', '\n'])}${parts.join(pick(r, ['\n', '\r\n', '\r', '\n\n']))}`,
      );
      return { body, how: 'line ends' };
    },
  },
  {
    name: 'many rows',
    weight: 3,
    make(r) {
      const n = SMALL_LIMITS.maxRecords + int(r, 3) - 1;
      const row = JSON.stringify({ input: marker(r) });
      return { body: utf8(Array(n).fill(row).join('\n')), how: 'many rows' };
    },
  },
];

// ---- Parquet ---------------------------------------------------------------------------------

type Columns = Parameters<typeof parquetWriteBuffer>[0]['columnData'];

/** A valid Parquet file of `n` random rows; now and then with a column no Record has. */
function parquetFile(r: Rand, n: number): Uint8Array {
  const all = rows(r, n);
  const col = (
    name: string,
    type: 'STRING' | 'JSON',
    get: (row: Record<string, unknown>) => unknown,
  ) => ({
    name,
    type,
    data: all.map((row) => {
      const v = get(row);
      return v === undefined
        ? null
        : type === 'STRING'
          ? String(typeof v === 'string' ? v : JSON.stringify(v))
          : v;
    }),
  });
  const columns: Columns = [
    r() < 0.8
      ? col('id', 'STRING', (row) => (row.id === undefined ? undefined : String(row.id)))
      : { name: 'id', type: 'INT64', data: all.map((_, i) => BigInt(i + int(r, 3))) },
    col('input', 'STRING', () => text(r)),
    col('expected', pick(r, ['STRING', 'JSON'] as const), () => maybe(r, 0.7, () => text(r))),
    col('metadata', 'JSON', (row) => row.metadata),
    col('labels', 'JSON', (row) => row.labels),
    col('trajectory', 'JSON', (row) => row.trajectory),
  ];
  if (r() < 0.15) {
    columns.push(
      pick(r, [
        { name: 'output', type: 'BYTE_ARRAY', data: all.map(() => utf8(text(r))) },
        { name: 'created', type: 'TIMESTAMP', data: all.map(() => new Date(int(r, 2 ** 40))) },
        { name: 'usage', type: 'JSON', data: all.map(() => ({ inputTokens: -1 })) },
      ] as Columns),
    );
  }
  return new Uint8Array(
    parquetWriteBuffer({
      columnData: columns,
      codec: pick(r, ['SNAPPY', 'UNCOMPRESSED'] as const),
      pageSize: pick(r, [256, 4096, 1024 * 1024]),
      rowGroupSize: pick(r, [2, 7, 1000]),
      statistics: r() < 0.5,
    }),
  );
}

interface PageLayout {
  /** Offsets of page headers and where each header ends. */
  headers: { start: number; end: number }[];
  footer: { start: number; end: number };
}

function layout(file: Uint8Array): PageLayout {
  const buffer = new Uint8Array(file).buffer;
  const view = new DataView(buffer);
  const metadata = parquetMetadata(buffer);
  const headers: PageLayout['headers'] = [];
  for (const group of metadata.row_groups) {
    for (const chunk of group.columns) {
      const meta = chunk.meta_data!;
      let offset = Number(meta.dictionary_page_offset ?? meta.data_page_offset);
      const end = offset + Number(meta.total_compressed_size);
      while (offset < end) {
        const reader = { view, offset };
        const header = parquetHeader(reader);
        headers.push({ start: offset, end: reader.offset });
        offset = reader.offset + header.compressed_page_size;
      }
    }
  }
  const metaLength = view.getUint32(file.length - 8, true);
  return { headers, footer: { start: file.length - 8 - metaLength, end: file.length - 8 } };
}

function zigzagVarint(v: number): number[] {
  let x = v >= 0 ? v * 2 : -v * 2 - 1;
  const out: number[] = [];
  while (x >= 0x80) {
    out.push((x % 128) | 0x80);
    x = Math.floor(x / 128);
  }
  out.push(x);
  return out;
}

/** The varint of the compact i32 field whose header byte is at `at` (0x15: next field, i32). */
function i32Field(file: Uint8Array, at: number) {
  if (file[at] !== 0x15) return undefined;
  let last = at + 1;
  while (last < file.length && file[last]! >= 0x80) last++;
  return { at: at + 1, size: last - at, next: last + 1 };
}

const flipIn = (r: Rand, body: Uint8Array, start: number, end: number) => {
  const out = new Uint8Array(body);
  const flips = 1 + int(r, 4);
  for (let i = 0; i < flips && end > start; i++)
    out[start + int(r, end - start)]! ^= 1 << int(r, 8);
  return out;
};

/** Mutations that know the file's layout: page headers and their sizes, the footer. */
function parquetOps(file: Uint8Array): ByteOp[] {
  const { headers, footer } = layout(file);
  const sizes = (r: Rand) =>
    pick(r, [0, 1, -1, 7, 2 ** 31 - 1, 16 * 1024 + 1, 4 * 1024 * 1024 + 1, int(r, 1 << 24)]);
  return [
    {
      name: 'page header',
      apply(r, body) {
        const h = pick(r, headers);
        return flipIn(r, body, h.start, h.end);
      },
    },
    {
      name: 'page size',
      apply(r, body) {
        // PageHeader: 1 type, 2 uncompressed_page_size, 3 compressed_page_size (compact i32s).
        const h = pick(r, headers);
        const type = i32Field(body, h.start);
        const uncompressed = type && i32Field(body, type.next);
        const compressed = uncompressed && i32Field(body, uncompressed.next);
        const f = r() < 0.5 ? uncompressed : compressed;
        if (f === undefined) return flipIn(r, body, h.start, h.end);
        return splice(body, f.at, f.size, zigzagVarint(sizes(r)));
      },
    },
    {
      name: 'footer',
      apply: (r, body) => flipIn(r, body, footer.start, footer.end),
    },
    {
      name: 'footer length',
      apply(r, body) {
        const out = new Uint8Array(body);
        const length = footer.end - footer.start;
        const v = pick(r, [0, length - 1, length + 1, file.length, 2 ** 32 - 1, int(r, 2 ** 32)]);
        new DataView(out.buffer).setUint32(out.length - 8, v >>> 0, true);
        return out;
      },
    },
    {
      name: 'cut pages',
      apply(r, body) {
        // Bytes removed between the magic and the footer: the offsets now point elsewhere.
        const a = 4 + int(r, Math.max(1, footer.start - 4));
        return splice(body, a, Math.min(1 + int(r, 64), footer.start - a), []);
      },
    },
  ];
}

interface ParquetSeed {
  body: Uint8Array;
  ops: ByteOp[];
}

function parquetWays(seeds: readonly ParquetSeed[]): Way<{ body: Uint8Array; how: string }>[] {
  const bodies = seeds.map((s) => s.body);
  return [
    { name: 'valid', weight: 3, make: (r) => ({ body: pick(r, bodies), how: 'valid' }) },
    {
      name: 'generated',
      weight: 4,
      make: (r) => ({ body: parquetFile(r, 1 + int(r, 12)), how: 'generated' }),
    },
    {
      name: 'mutated',
      weight: 25,
      make(r) {
        const seed = pick(r, seeds);
        return mutateBytes(r, seed.body, bodies, seed.ops);
      },
    },
  ];
}

// ---- checks ----------------------------------------------------------------------------------

/** Markers a mutation moved into a key of a row (keys may be named in errors). */
function markersInKeys(body: Uint8Array): string[] {
  const found: string[] = [];
  const visit = (v: unknown) => {
    if (typeof v !== 'object' || v === null) return;
    for (const [k, inner] of Object.entries(v)) {
      found.push(...(k.match(MARKERS) ?? []));
      visit(inner);
    }
  };
  for (const line of Buffer.from(body).toString('utf8').split(/\r?\n/)) {
    try {
      visit(JSON.parse(line.replace(/^\ufeff/, '')));
    } catch {
      // Not JSON: its keys are never shown.
    }
  }
  return found;
}

function checkDataset(out: { bytes: Buffer; records: number; sha256: string }): string | undefined {
  if (createHash('sha256').update(out.bytes).digest('hex') !== out.sha256) return 'wrong sha256';
  const lines = out.bytes.toString('utf8').split('\n');
  if (lines.pop() !== '') return 'the dataset does not end with a newline';
  if (lines.length !== out.records || out.records < 1) return 'record count mismatch';
  const ids = new Set<string>();
  for (const line of lines) {
    const record = JSON.parse(line) as { id?: unknown };
    if (typeof record.id !== 'string' || record.id === '') return 'a record without an id';
    if (ids.has(record.id)) return 'duplicate record ids';
    ids.add(record.id);
  }
  return undefined;
}

async function run(input: DatasetInput): Promise<Trial> {
  const limits = input.limits === 'small' ? SMALL_LIMITS : DATASET_LIMITS;
  const group = input.format;
  try {
    const out = await normalizeDataset(input.body, input.format, limits);
    const bad = checkDataset(out);
    if (bad !== undefined) return { outcome: 'broken', failure: bad };
    return {
      outcome: `${group}: normalized`,
      figures: { [`${group}: records`]: out.records, [`${group}: bytes out`]: out.bytes.length },
    };
  } catch (err) {
    if (!isTouchstoneError(err) || !err.code.startsWith('DATASET_')) {
      return { outcome: 'thrown', failure: `unexpected ${err instanceof Error ? err.stack : err}` };
    }
    const shown = `${err.message}\n${JSON.stringify(err.details)}`;
    const keys = new Set<string>();
    for (const m of shown.match(MARKERS) ?? []) {
      if (keys.size === 0) for (const k of markersInKeys(input.body)) keys.add(k);
      if (!keys.has(m)) return { outcome: 'thrown', failure: `${err.code} echoes a row value` };
    }
    return { outcome: `${group}: ${err.code}` };
  }
}

export async function createDatasetsTarget(): Promise<FuzzTarget<DatasetInput>> {
  // The seed files are the same whatever the run's seed.
  const seedRandom = rng(0xda7a);
  const seeds = Array.from({ length: 8 }, (_, i) => {
    const body = parquetFile(seedRandom, 1 + i * 3);
    return { body, ops: parquetOps(body) };
  });
  const parquet = parquetWays(seeds);
  return {
    name: 'datasets',
    generate(r, i) {
      const isParquet = i % 3 === 2;
      const { value } = choose(r, isParquet ? parquet : JSONL_WAYS);
      // Now and then the wrong format for the bytes: a Parquet file read as JSON Lines and back.
      const swapped = r() < 0.03;
      const format: DatasetFormat = isParquet !== swapped ? 'parquet' : 'jsonl';
      return {
        input: {
          body: value.body,
          format,
          limits: r() < 0.25 ? 'production' : 'small',
          how: value.how + (swapped ? ' (read as the other format)' : ''),
        },
        mutation: `${isParquet ? 'parquet' : 'jsonl'}: ${value.how.split(' + ')[0]}`,
      };
    },
    run,
    describe: (input) => `${input.format}, ${input.limits} limits; ${input.how}`,
    bytes: (input) => input.body,
  };
}
