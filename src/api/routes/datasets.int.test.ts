import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../../test/support/app.js';
import { storeVariants } from '../../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../../auth/index.js';
import { isTouchstoneError } from '../../core/index.js';

/** The REST upload end to end: normalization, publication, limits, refusals, the reader. */

const SECRET = 'sk-live-ROW-VALUE-9d2f61';

const jsonl = (...rows: unknown[]) =>
  rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n');

function parquet() {
  return Buffer.from(
    parquetWriteBuffer({
      columnData: [
        { name: 'id', data: ['t1', 't2', 't3'], type: 'STRING' },
        { name: 'input', data: ['2+2?', 'capital of France?', 'largest planet?'], type: 'STRING' },
        { name: 'expected_output', data: ['4', 'Paris', 'Jupiter'], type: 'STRING' },
        { name: 'labels', data: [{ level: 'easy' }, null, { level: 'hard' }], type: 'JSON' },
      ],
    }),
  );
}

describe.each(storeVariants())('dataset upload over REST on $name', (variant) => {
  let t: TestApp;
  let dispose: () => Promise<void>;
  let editor: string;
  let viewer: string;

  beforeAll(async () => {
    const store = await variant.open();
    dispose = store.dispose;
    t = await testApp({ ...store.overrides, auth: {} });
    editor = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['editor'] })).secret;
    viewer = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['viewer'] })).secret;
  });
  afterAll(async () => {
    await t.close();
    await dispose();
  });

  const upload = (
    name: string,
    body: string | Buffer,
    options: { query?: string; type?: string; key?: string; headers?: Record<string, string> } = {},
  ) =>
    t.app.server.inject({
      method: 'POST',
      url: `/v1alpha1/datasets/${name}/upload${options.query ?? ''}`,
      payload: body,
      headers: {
        'content-type': options.type ?? 'application/octet-stream',
        authorization: `Bearer ${options.key ?? editor}`,
        ...options.headers,
      },
    });

  const published = (project: string, name: string) => {
    const dir = join(t.dataDir, 'datasets', 'datasets', project, name);
    return existsSync(dir) ? readdirSync(dir) : [];
  };

  it('publishes a JSON Lines upload under datasets/<project>/<name>/<sha256>.jsonl', async () => {
    const body = jsonl(
      { id: 'a', input: 'What is 2+2?', output: '4', reference: '4' },
      { question: 'capital?', expected: 'Paris', metadata: { topic: 'geo' } },
    );
    const res = await upload('qa', body, { type: 'application/x-ndjson' });
    expect(res.statusCode).toBe(200);
    const result = res.json();
    expect(result).toEqual({
      path: `datasets/p1/qa/${result.sha256}.jsonl`,
      records: 2,
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const file = readFileSync(join(t.dataDir, 'datasets', result.path));
    expect(createHash('sha256').update(file).digest('hex')).toBe(result.sha256);
    expect(await t.app.datasets.read('p1', result.path)).toEqual([
      { id: 'a', input: 'What is 2+2?', output: '4', reference: '4' },
      { id: '2', input: 'capital?', reference: 'Paris', metadata: { topic: 'geo' } },
    ]);
    // The same file again: the same path, no second copy.
    const again = await upload('qa', body, { type: 'application/jsonl' });
    expect(again.json().path).toBe(result.path);
    expect(published('p1', 'qa')).toEqual([`${result.sha256}.jsonl`]);
  });

  it('publishes Parquet by format, by content type, or by its magic bytes', async () => {
    const explicit = await upload('pq', parquet(), { query: '?format=parquet' });
    expect(explicit.statusCode).toBe(200);
    expect(explicit.json().records).toBe(3);
    const byType = await upload('pq', parquet(), { type: 'application/vnd.apache.parquet' });
    const sniffed = await upload('pq', parquet());
    expect(byType.json().path).toBe(explicit.json().path);
    expect(sniffed.json().path).toBe(explicit.json().path);
    const records = await t.app.datasets.read('p1', explicit.json().path);
    expect(records[0]).toEqual({
      id: 't1',
      input: '2+2?',
      reference: '4',
      labels: { level: 'easy' },
    });
    expect(records[1]).toEqual({ id: 't2', input: 'capital of France?', reference: 'Paris' });
  });

  it.each([
    [
      'a row that is not an object',
      jsonl({ input: 'ok' }, `["${SECRET}"]`),
      'DATASET_ROW_INVALID',
      'line 2: is an array, not a Record object',
    ],
    [
      'an unknown field',
      jsonl({ input: 'ok', password: SECRET }),
      'DATASET_ROW_INVALID',
      'line 1, field password: unknown field',
    ],
    [
      'a value of the wrong type',
      jsonl({ input: 'ok' }, { input: 'x', metadata: SECRET }),
      'DATASET_ROW_INVALID',
      'line 2, field metadata:',
    ],
    [
      'broken JSON',
      jsonl({ input: 'ok' }, { input: 'ok' }, `{"input": "${SECRET}"`),
      'DATASET_ROW_INVALID',
      'line 3: not valid JSON',
    ],
    [
      'duplicate explicit ids',
      jsonl({ id: 'k', input: SECRET }, { id: 'k', input: SECRET }),
      'DATASET_ID_DUPLICATE',
      'line 2, field id: duplicates the id of line 1',
    ],
    ['no records', '\n\n', 'DATASET_EMPTY', 'holds no records'],
  ])(
    'rejects %s as a whole, naming the row, echoing nothing, publishing nothing',
    async (_, body, code, text) => {
      const res = await upload('rejected', body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe(code);
      expect(res.json().error.message).toContain(text);
      expect(res.body).not.toContain(SECRET);
      expect(published('p1', 'rejected')).toEqual([]);
    },
  );

  it('refuses an upload over 64 MiB with 413 naming the limit', async () => {
    const res = await upload('big', Buffer.alloc(64 * 1024 * 1024 + 1, 0x20));
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('DATASET_TOO_LARGE');
    expect(res.json().error.message).toContain('67108864');
  });

  it('refuses multipart bodies, bad names, formats and query parameters before reading the body', async () => {
    const multipart = await upload('qa', 'x', { type: 'multipart/form-data; boundary=x' });
    expect(multipart.statusCode).toBe(415);
    expect(multipart.json().error.message).toContain('not a multipart form');
    const name = await upload('Bad Name', 'x');
    expect(name.statusCode).toBe(400);
    expect(name.json().error.code).toBe('DATASET_INVALID_REQUEST');
    expect(name.json().error.details[0].path).toBe('name');
    const format = await upload('qa', 'x', { query: '?format=csv' });
    expect(format.statusCode).toBe(400);
    expect(format.json().error.details[0].path).toBe('format');
    const unknown = await upload('qa', 'x', { query: '?projekt=p1' });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.message).toContain('projekt');
  });

  it('needs datasets.write in the key’s own project', async () => {
    const denied = await upload('qa', jsonl({ input: 'a' }), { key: viewer });
    expect(denied.statusCode).toBe(403);
    const other = await upload('qa', jsonl({ input: 'a' }), { query: '?project=p2' });
    expect(other.statusCode).toBe(403);
    expect(published('p2', 'qa')).toEqual([]);
  });

  it('refuses a third conversion at once with 429 and Retry-After, then accepts again', async () => {
    const held = [t.app.datasets.reserve(), t.app.datasets.reserve()];
    try {
      const res = await upload('busy', jsonl({ input: 'a' }));
      expect(res.statusCode).toBe(429);
      expect(res.json().error.code).toBe('DATASET_CAPACITY_EXHAUSTED');
      expect(res.headers['retry-after']).toBe('2');
    } finally {
      for (const slot of held) slot.release();
    }
    expect((await upload('busy', jsonl({ input: 'a' }))).statusCode).toBe(200);
    // Refused and failed uploads gave their slots back.
    const slots = [t.app.datasets.reserve(), t.app.datasets.reserve()];
    for (const slot of slots) slot.release();
  });

  it('replays a keyed upload and refuses the key with another file', async () => {
    const key = `upload-${variant.name}`;
    const first = await upload('keyed', jsonl({ input: 'a' }), {
      headers: { 'idempotency-key': key },
    });
    expect(first.statusCode).toBe(200);
    const replay = await upload('keyed', jsonl({ input: 'a' }), {
      headers: { 'idempotency-key': key },
    });
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual(first.json());
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const changed = await upload('keyed', jsonl({ input: 'b' }), {
      headers: { 'idempotency-key': key },
    });
    expect(changed.statusCode).toBe(409);
  });

  it('reads only published paths of the asking project, and notices a changed file', async () => {
    const res = await upload('reader', jsonl({ input: 'a' }, { input: 'b' }));
    const { path } = res.json();
    const refused = async (project: string, p: string) => {
      try {
        await t.app.datasets.read(project, p);
      } catch (err) {
        if (isTouchstoneError(err)) return err.code;
        throw err;
      }
      return 'read';
    };
    expect(await refused('p2', path)).toBe('DATASET_PATH_INVALID');
    expect(await refused('p1', '../p1/x.jsonl')).toBe('DATASET_PATH_INVALID');
    expect(await refused('p1', path.replace('reader', '..'))).toBe('DATASET_PATH_INVALID');
    expect(await refused('p1', `datasets/p1/reader/${'0'.repeat(64)}.jsonl`)).toBe(
      'DATASET_NOT_FOUND',
    );
    writeFileSync(join(t.dataDir, 'datasets', path), jsonl({ id: '1', input: 'changed' }));
    expect(await refused('p1', path)).toBe('DATASET_CORRUPT');
  });

  it('imports from incoming/<project>/ under a local root, and refuses a link to another project', async () => {
    const incoming = join(t.dataDir, 'datasets', 'incoming');
    mkdirSync(join(incoming, 'p1'), { recursive: true });
    mkdirSync(join(incoming, 'p2'), { recursive: true });
    writeFileSync(join(incoming, 'p1', 'eval.parquet'), parquet());
    writeFileSync(join(incoming, 'p2', 'private.jsonl'), jsonl({ input: SECRET }));
    symlinkSync(join(incoming, 'p2', 'private.jsonl'), join(incoming, 'p1', 'borrowed.jsonl'));
    const principal = await t.app.keys.authenticate(editor);
    const imported = await t.app.datasets.import(principal, {
      name: 'imported',
      uri: 'incoming/p1/eval.parquet',
    });
    expect(imported.records).toBe(3);
    const viaUrl = await t.app.datasets.import(principal, {
      name: 'imported',
      uri: `file://${join(incoming, 'p1', 'eval.parquet')}`,
    });
    expect(viaUrl.path).toBe(imported.path);
    for (const uri of [
      'incoming/p1/borrowed.jsonl',
      'incoming/p2/private.jsonl',
      'incoming/p1/../p2/private.jsonl',
      'datasets/p1/qa/x.jsonl',
      's3://bucket/incoming/p1/eval.parquet',
      `file://${join(incoming, '..', '..', 'touchstone.db')}`,
    ]) {
      await expect(
        t.app.datasets.import(principal, { name: 'imported', uri }),
        uri,
      ).rejects.toMatchObject({ code: 'DATASET_URI_REFUSED' });
    }
    await expect(
      t.app.datasets.import(principal, { name: 'imported', uri: 'incoming/p1/missing.jsonl' }),
    ).rejects.toMatchObject({ code: 'DATASET_NOT_FOUND' });
  });

  it('lists a project’s published datasets with their record counts, page by page', async () => {
    const keyOf = async (roles: ('editor' | 'viewer' | 'ingest')[]) =>
      (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'listing', roles })).secret;
    const [writer, reader, ingest] = [
      await keyOf(['editor']),
      await keyOf(['viewer']),
      await keyOf(['ingest']),
    ];
    const alpha = (
      await upload('alpha', jsonl({ input: 'a' }, { input: 'b' }, { input: 'c' }), { key: writer })
    ).json();
    const beta1 = (await upload('beta', jsonl({ input: 'x' }), { key: writer })).json();
    const beta2 = (await upload('beta', jsonl({ input: 'y' }), { key: writer })).json();
    const list = (query: string, key = reader) =>
      t.app.server.inject({
        url: `/v1alpha1/datasets${query}`,
        headers: { authorization: `Bearer ${key}` },
      });

    const all = await list('');
    expect(all.statusCode, all.body).toBe(200);
    const { datasets, next_page_token } = all.json();
    expect(next_page_token).toBeUndefined();
    expect(datasets[0]).toEqual({
      name: 'alpha',
      path: alpha.path,
      sha256: alpha.sha256,
      records: 3,
      bytes: readFileSync(join(t.dataDir, 'datasets', alpha.path)).length,
      uploadedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    // By path: name, then content hash; both versions of beta are there.
    expect(datasets.map((d: { path: string }) => d.path)).toEqual(
      [alpha.path, beta1.path, beta2.path].sort(),
    );

    const first = (await list('?page_size=2')).json();
    expect(first.datasets).toHaveLength(2);
    const second = (await list(`?page_size=2&page_token=${first.next_page_token}`)).json();
    expect([...first.datasets, ...second.datasets]).toEqual(datasets);
    expect(second.next_page_token).toBeUndefined();

    // Another project's datasets are not listed; a key without datasets.read lists nothing.
    const p1 = (await list('', viewer)).json().datasets as { path: string }[];
    expect(p1.length).toBeGreaterThan(0);
    expect(p1.every((d) => d.path.startsWith('datasets/p1/'))).toBe(true);
    expect((await list('', ingest)).statusCode).toBe(403);
    expect((await list('?project=p1')).statusCode).toBe(403);
    const badToken = await list(`?page_token=${Buffer.from('datasets/p1/').toString('base64url')}`);
    expect(badToken.statusCode).toBe(400);
    expect(badToken.json().error.code).toBe('DATASET_INVALID_REQUEST');

    // A dataset whose details are missing (published before counts were kept) is still listed.
    rmSync(join(t.dataDir, 'datasets', 'meta', 'listing', 'alpha'), { recursive: true });
    const after = (await list('')).json().datasets;
    expect(after[0]).not.toHaveProperty('records');
    expect(after[0].path).toBe(alpha.path);
  });
});
