import { parquetWriteBuffer } from 'hyparquet-writer';
import { describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import { DATASET_LIMITS, type DatasetLimits } from './limits.js';
import { normalizeDataset, sniffFormat } from './normalize.js';

const SECRET = 'sk-live-DO-NOT-ECHO-4242';
const limits: DatasetLimits = { ...DATASET_LIMITS };

const jsonl = (...lines: unknown[]) =>
  Buffer.from(lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n'));

async function rejection(
  body: Uint8Array,
  format: 'jsonl' | 'parquet' = 'jsonl',
  over: Partial<DatasetLimits> = {},
): Promise<TouchstoneError> {
  try {
    await normalizeDataset(body, format, { ...limits, ...over });
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    // Nothing of the file's content may come back in an error.
    expect(JSON.stringify({ m: err.message, d: err.details })).not.toContain(SECRET);
    return err;
  }
  throw new Error('expected the dataset to be rejected');
}

const records = (bytes: Buffer) =>
  bytes
    .toString('utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('JSON Lines normalization', () => {
  it('maps the documented fields and aliases to Records, numbering rows without an id', async () => {
    const body = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      jsonl(
        { id: 'q1', input: 'What is 2+2?', output: '4', reference: '4', metadata: { k: 1 } },
        '',
        { question: 'capital?', answer: 'Paris', expected: ['Paris', 'paris'], context: 'doc' },
        { id: 7, inputs: { a: 1 }, response: 'x', ground_truth: 'x', labels: { v: 2, ok: true } },
        {
          messages: [{ role: 'user', content: 'hi' }],
          trajectory: [{ type: 'tool', name: 'search', input: '{"q":1}', output: 'r' }],
          usage: { inputTokens: 3, latencyMs: 12 },
        },
      ),
      Buffer.from('\r\n\r\n'),
    ]);
    const out = await normalizeDataset(body, 'jsonl', limits);
    expect(out.records).toBe(4);
    const rows = records(out.bytes);
    expect(rows[0]).toEqual({
      id: 'q1',
      input: 'What is 2+2?',
      output: '4',
      reference: '4',
      metadata: { k: 1 },
    });
    // Blank lines do not count: the second record is record 2.
    expect(rows[1]).toEqual({
      id: '2',
      input: 'capital?',
      output: 'Paris',
      reference: ['Paris', 'paris'],
      context: ['doc'],
    });
    expect(rows[2]).toMatchObject({ id: '7', labels: { v: '2', ok: 'true' }, reference: 'x' });
    expect(rows[3].id).toBe('4');
    expect(rows[3].trajectory[0]).toMatchObject({ type: 'tool', name: 'search', error: '' });
    expect(out.sha256).toMatch(/^[0-9a-f]{64}$/);
    // The same content normalizes to the same bytes (and so the same path).
    expect((await normalizeDataset(body, 'jsonl', limits)).sha256).toBe(out.sha256);
  });

  it.each([
    ['an array', `[1, "${SECRET}"]`, 'line 1: is an array, not a Record object'],
    ['a string', `"${SECRET}"`, 'line 1: is a string, not a Record object'],
    ['a number', '42', 'line 1: is a number, not a Record object'],
    ['null', 'null', 'line 1: is null, not a Record object'],
    ['invalid JSON', `{"input": "${SECRET}",}`, 'line 1: not valid JSON'],
    [
      'an unknown field',
      { input: 'q', secret_key: SECRET },
      'line 1, field secret_key: unknown field "secret_key"',
    ],
    [
      'a labels value that is an object',
      { labels: { a: { b: SECRET } } },
      'line 1, field labels.a:',
    ],
    ['metadata that is not an object', { metadata: SECRET }, 'line 1, field metadata:'],
    ['context that is a number', { context: 3 }, 'line 1, field context:'],
    [
      'a fractional id',
      { id: 1.5, input: SECRET },
      'line 1, field id: must be a string or an integer',
    ],
    ['an empty id', { id: '', input: SECRET }, 'line 1, field id:'],
    [
      'a step of an unknown type',
      { trajectory: [{ type: 'robot', input: SECRET }] },
      'line 1, field trajectory[0].type:',
    ],
    ['negative usage', { usage: { inputTokens: -1 } }, 'line 1, field usage.inputTokens:'],
    [
      'two fields for one Record field',
      { input: SECRET, question: SECRET },
      'line 1, field question: fields "input" and "question" both set input',
    ],
    [
      'an alias with a wrong type',
      { expected_output: 1, context: [SECRET], labels: 5 },
      'line 1, field labels:',
    ],
  ])('rejects a row that is %s, naming line and field without the value', async (_, row, text) => {
    const err = await rejection(jsonl(row));
    expect(err.code).toBe('DATASET_ROW_INVALID');
    expect(err.message).toContain('nothing was published');
    expect(err.message).toContain(text);
    expect(err.details.length).toBeGreaterThan(0);
    expect(err.details[0]?.path).toMatch(/^lines\[1\]/);
  });

  it('names the right line among good ones, and reports several bad rows at once', async () => {
    const err = await rejection(
      jsonl({ input: 'a' }, { input: 'b' }, '', `{"input": ${SECRET}}`, { input: 'c' }, [SECRET]),
    );
    expect(err.code).toBe('DATASET_ROW_INVALID');
    expect(err.message).toContain(
      'line 4: not valid JSON (and problems in 1 other row; see details)',
    );
    expect(err.details.map((d) => d.path)).toEqual(['lines[4]', 'lines[6]']);
  });

  it('stops after 20 bad rows', async () => {
    const lines = Array.from({ length: 50 }, () => `{"oops": "${SECRET}"}`);
    const err = await rejection(Buffer.from(lines.join('\n')));
    expect(err.details).toHaveLength(20);
    expect(err.message).toContain('checking stopped');
  });

  it('rejects invalid UTF-8', async () => {
    const body = Buffer.concat([
      Buffer.from('{"input": "a'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}'),
    ]);
    const err = await rejection(body);
    expect(err.code).toBe('DATASET_ROW_INVALID');
    expect(err.message).toContain('line 1: not valid UTF-8');
  });

  it('rejects duplicate explicit ids, and an explicit id equal to a position number', async () => {
    const dup = await rejection(
      jsonl({ id: 'a', input: SECRET }, { id: 'b' }, { id: 'a', input: SECRET }),
    );
    expect(dup.code).toBe('DATASET_ID_DUPLICATE');
    expect(dup.message).toContain('line 3, field id: duplicates the id of line 1');
    const numbered = await rejection(jsonl({ input: 'x' }, { id: 1, input: 'y' }));
    expect(numbered.code).toBe('DATASET_ID_DUPLICATE');
    expect(numbered.message).toContain('line 2, field id: duplicates the id of line 1');
    // Duplicates beside other problems are reported as invalid rows, with both listed.
    const both = await rejection(jsonl({ id: 'a' }, { id: 'a' }, { bad: 1 }));
    expect(both.code).toBe('DATASET_ROW_INVALID');
    expect(both.details.map((d) => d.path)).toEqual(['lines[2].id', 'lines[3].bad']);
  });

  it('enforces the row, record, upload and normalized limits with their own errors', async () => {
    const row = await rejection(jsonl({ input: 'a' }, { input: SECRET.repeat(10) }), 'jsonl', {
      maxRowBytes: 100,
    });
    expect(row.code).toBe('DATASET_ROW_TOO_LARGE');
    expect(row.message).toContain('line 2 is longer than 100 bytes');

    const many = await rejection(jsonl({ input: 'a' }, { input: 'b' }, { input: 'c' }), 'jsonl', {
      maxRecords: 2,
    });
    expect(many.code).toBe('DATASET_TOO_MANY_RECORDS');
    expect(many.message).toContain('line 3 is record 3; the limit is 2 records');

    const upload = await rejection(jsonl({ input: SECRET }), 'jsonl', { maxUploadBytes: 10 });
    expect(upload.code).toBe('DATASET_TOO_LARGE');

    // Normalizing adds ids: a file under the upload limit can exceed the normalized one.
    const normalized = await rejection(jsonl({ input: 'a' }, { input: 'b' }), 'jsonl', {
      maxNormalizedBytes: 40,
    });
    expect(normalized.code).toBe('DATASET_TOO_LARGE');
    expect(normalized.message).toContain('normalized dataset exceeds 40 bytes at line 2');
  });

  it('rejects a file without records', async () => {
    expect((await rejection(Buffer.from('\n \n'))).code).toBe('DATASET_EMPTY');
    expect((await rejection(Buffer.alloc(0))).code).toBe('DATASET_EMPTY');
  });

  it('rejects nesting too deep to store without crashing', async () => {
    const deep = `{"metadata": {"x": ${'['.repeat(200_000)}${']'.repeat(200_000)}}}`;
    const err = await rejection(Buffer.from(deep));
    expect(err.code).toBe('DATASET_ROW_INVALID');
  });
});

function parquet(columns: Parameters<typeof parquetWriteBuffer>[0]['columnData'], options = {}) {
  return new Uint8Array(parquetWriteBuffer({ columnData: columns, ...options }));
}

describe('Parquet normalization', () => {
  it('maps columns to Record fields, converting Parquet types to JSON', async () => {
    const body = parquet([
      { name: 'id', data: ['a', null, 'c'], type: 'STRING' },
      { name: 'input', data: ['q1', 'q2', 'q3'], type: 'STRING' },
      { name: 'expected', data: ['r1', null, 'r3'], type: 'STRING' },
      { name: 'metadata', data: [{ n: 1 }, { at: 'x', list: [1, 2] }, null], type: 'JSON' },
      { name: 'labels', data: [{ split: 'test' }, null, { split: 'train' }], type: 'JSON' },
    ]);
    expect(sniffFormat(body)).toBe('parquet');
    const out = await normalizeDataset(body, 'parquet', limits);
    expect(out.records).toBe(3);
    expect(records(out.bytes)).toEqual([
      { id: 'a', input: 'q1', reference: 'r1', metadata: { n: 1 }, labels: { split: 'test' } },
      { id: '2', input: 'q2', metadata: { at: 'x', list: [1, 2] } },
      { id: 'c', input: 'q3', reference: 'r3', labels: { split: 'train' } },
    ]);
  });

  it('turns int64 ids into text and timestamps into RFC 3339', async () => {
    const body = parquet([
      { name: 'id', data: [10n, 11n], type: 'INT64' },
      { name: 'input', data: ['a', 'b'], type: 'STRING' },
      { name: 'metadata', data: [{ k: 1 }, { k: 2 }], type: 'JSON' },
    ]);
    const rows = records((await normalizeDataset(body, 'parquet', limits)).bytes);
    expect(rows.map((r) => r.id)).toEqual(['10', '11']);
  });

  it.each([
    [
      'a binary column',
      [{ name: 'input', data: [new Uint8Array([1, 2]), new Uint8Array([3])], type: 'BYTE_ARRAY' }],
      'row 0, field input: binary value',
    ],
    [
      'an unknown column',
      [
        { name: 'input', data: ['a', 'b'], type: 'STRING' },
        { name: 'api_token', data: [SECRET, SECRET], type: 'STRING' },
      ],
      'row 0, field api_token: unknown field "api_token"',
    ],
    [
      'a huge integer',
      [
        { name: 'input', data: ['a', 'b'], type: 'STRING' },
        { name: 'id', data: [1n, 2n ** 60n], type: 'INT64' },
      ],
      'row 1, field id: integer outside ±2^53',
    ],
    [
      'a NaN',
      [{ name: 'output', data: [1.5, Number.NaN], type: 'DOUBLE' }],
      'row 1, field output: not a finite number',
    ],
    [
      'metadata that is text',
      [{ name: 'metadata', data: [SECRET, SECRET], type: 'STRING' }],
      'row 0, field metadata:',
    ],
    [
      'duplicate ids',
      [{ name: 'id', data: ['x', 'x'], type: 'STRING' }],
      'row 1, field id: duplicates the id of row 0',
    ],
  ] as const)('rejects %s, naming the row index and field', async (_, columns, text) => {
    const err = await rejection(parquet(columns as never), 'parquet');
    expect(['DATASET_ROW_INVALID', 'DATASET_ID_DUPLICATE']).toContain(err.code);
    expect(err.message).toContain(text);
    expect(err.details[0]?.path).toMatch(/^rows\[\d+\]/);
  });

  it('refuses pages over the page limit before decoding them', async () => {
    const body = parquet([{ name: 'input', data: [SECRET.repeat(200), 'b'], type: 'STRING' }], {
      codec: 'UNCOMPRESSED',
    });
    const err = await rejection(body, 'parquet', { maxPageBytes: 1000 });
    expect(err.code).toBe('DATASET_PAGE_TOO_LARGE');
    expect(err.message).toMatch(/row group 0, column "input" has a page of \d+ bytes/);
  });

  it('refuses a file whose pages decompress beyond the normalized limit', async () => {
    const body = parquet([
      { name: 'input', data: ['a'.repeat(50_000), 'b'.repeat(50_000)], type: 'STRING' },
    ]);
    expect(body.length).toBeLessThan(20_000);
    const err = await rejection(body, 'parquet', { maxNormalizedBytes: 60_000 });
    expect(err.code).toBe('DATASET_TOO_LARGE');
    expect(err.message).toContain('decompress to more than 60000 bytes');
  });

  it('refuses too many rows from the footer, before reading them', async () => {
    const body = parquet([{ name: 'input', data: ['a', 'b', 'c'], type: 'STRING' }]);
    const err = await rejection(body, 'parquet', { maxRecords: 2 });
    expect(err.code).toBe('DATASET_TOO_MANY_RECORDS');
  });

  it('refuses what is not Parquet, and a damaged file', async () => {
    expect((await rejection(Buffer.from(`{"input": "${SECRET}"}`), 'parquet')).code).toBe(
      'DATASET_FORMAT_INVALID',
    );
    const body = parquet([{ name: 'input', data: ['a', 'b'], type: 'STRING' }]);
    // Break the footer length (the 4 bytes before the trailing magic).
    const broken = body.slice();
    broken.set([0xff, 0xff, 0xff, 0x7f], broken.length - 8);
    const err = await rejection(broken, 'parquet');
    expect(err.code).toBe('DATASET_FORMAT_INVALID');
    expect(err.message).toContain('not a readable Parquet file');
  });

  it('refuses column chunks the schema does not name, before a damaged page of one is read', async () => {
    const body = parquet(
      [
        { name: 'input', data: ['a'], type: 'STRING' },
        { name: 'metadata', data: [{ k: 'QQQQ' }], type: 'JSON' },
      ],
      { codec: 'UNCOMPRESSED', statistics: false },
    );
    const bytes = Buffer.from(body);
    // The schema's name of the field (its first mention, in the footer) no longer matches its
    // column chunk, and the chunk's page holds JSON that does not parse. The reader never waited
    // for such a chunk, so its failure escaped as an unhandled rejection and ended the process.
    const footer = bytes.length - 8 - bytes.readUInt32LE(bytes.length - 8);
    bytes.write('metedata', bytes.indexOf('metadata', footer));
    bytes.write('Q\u0001', bytes.indexOf('QQQQ'));
    const escaped: unknown[] = [];
    const onRejection = (reason: unknown) => escaped.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      const err = await rejection(new Uint8Array(bytes), 'parquet');
      expect(err.code).toBe('DATASET_FORMAT_INVALID');
      expect(err.message).toContain('row group 0, column "metadata": not a column of the schema');
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(escaped).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });

  it('refuses a schema that names two fields alike', async () => {
    const body = Buffer.from(
      parquet([
        { name: 'input', data: ['a'], type: 'STRING' },
        { name: 'inpux', data: ['b'], type: 'STRING' },
      ]),
    );
    const footer = body.length - 8 - body.readUInt32LE(body.length - 8);
    body.write('input', body.indexOf('inpux', footer));
    const err = await rejection(new Uint8Array(body), 'parquet');
    expect(err.code).toBe('DATASET_FORMAT_INVALID');
    expect(err.message).toContain('two fields are named "input"');
  });
});
