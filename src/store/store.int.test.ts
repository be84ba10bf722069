import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { freshPgSchema, PG_URL } from '../../test/support/stores.js';
import { FakeClock, type Span } from '../core/index.js';
import { type NewApiKey, openStore, type SpanBatch, type Store } from './index.js';
import { MIGRATIONS } from './migrations/index.js';
import { webhookStoreContract } from './webhooks-contract.testkit.js';

/**
 * The store contract, run on SQLite always and on PostgreSQL when TOUCHSTONE_TEST_PG names a
 * server (CI starts one). Every test gets an empty database: a temp dir for SQLite, a new schema
 * (selected through the connection's search_path) for PostgreSQL.
 */

/** One empty database; `open` may be called several times against it. */
interface Target {
  open(clock: FakeClock): Promise<Store>;
  /** Versions recorded in schema_migrations, read around the store. */
  appliedVersions(): Promise<number[]>;
  recordVersion(version: number): Promise<void>;
  /** Raw SQL beside the store (`?` placeholders on both dialects). */
  query(text: string, values?: unknown[]): Promise<Record<string, unknown>[]>;
  cleanup(): Promise<void>;
}

interface Harness {
  fresh(): Promise<Target>;
}

const sqliteHarness: Harness = {
  async fresh() {
    const root = mkdtempSync(join(tmpdir(), 'touchstone-store-'));
    const dataDir = join(root, 'data');
    const withDb = <T>(fn: (db: BetterSqlite3.Database) => T): T => {
      const db = new BetterSqlite3(join(dataDir, 'touchstone.db'));
      try {
        return fn(db);
      } finally {
        db.close();
      }
    };
    return {
      open: (clock) => openStore({ driver: 'sqlite' }, { clock, dataDir }),
      appliedVersions: async () =>
        withDb((db) =>
          (
            db.prepare('select version from schema_migrations order by version').all() as {
              version: number;
            }[]
          ).map((r) => r.version),
        ),
      recordVersion: async (version) => {
        withDb((db) =>
          db
            .prepare('insert into schema_migrations (version, name, applied_at) values (?, ?, ?)')
            .run(version, 'from-the-future', 0),
        );
      },
      query: async (text, values = []) =>
        withDb((db) => {
          const statement = db.prepare(text);
          if (statement.reader) return statement.all(...values) as Record<string, unknown>[];
          statement.run(...values);
          return [];
        }),
      cleanup: async () => rmSync(root, { recursive: true, force: true }),
    };
  },
};

function pgHarness(baseUrl: string): Harness {
  return {
    async fresh() {
      const schema = await freshPgSchema(baseUrl);
      const { admin } = schema;
      await admin.query(`set search_path to ${schema.name}`);
      const query = async <R extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
        (await admin.query<R>(text, values)).rows;
      return {
        open: (clock) =>
          openStore({ driver: 'postgres', url: schema.url, pool_size: 4 }, { clock }),
        appliedVersions: async () =>
          (
            await query<{ version: number }>(
              'select version from schema_migrations order by version',
            )
          ).map((r) => r.version),
        recordVersion: async (version) => {
          await query(
            'insert into schema_migrations (version, name, applied_at) values ($1, $2, 0)',
            [version, 'from-the-future'],
          );
        },
        query: (text, values = []) => {
          let n = 0;
          return query(
            text.replace(/\?/g, () => `$${++n}`),
            values,
          );
        },
        cleanup: () => schema.drop(),
      };
    },
  };
}

const T0 = Date.parse('2026-01-01T00:00:00Z');
const ALL_VERSIONS = MIGRATIONS.map((m) => m.version);
const iso = (ms: number) => new Date(ms).toISOString();

function newKey(n: number, overrides: Partial<NewApiKey> = {}): NewApiKey {
  return {
    id: `key_${String(n).padStart(4, '0')}`,
    project: 'alpha',
    name: `key ${n}`,
    roles: ['viewer'],
    labels: {},
    prefix: `tsk_k${n}`,
    createdAt: iso(T0 + n * 1000),
    secretHash: `hash-${n}`,
    ...overrides,
  };
}

function storeContract(harness: Harness): void {
  let target: Target;
  let clock: FakeClock;
  let store: Store;

  beforeEach(async () => {
    target = await harness.fresh();
    clock = new FakeClock(T0);
    store = await target.open(clock);
  });

  afterEach(async () => {
    await store.close();
    await target.cleanup();
  });

  describe('migrations', () => {
    it('are applied at open and recorded once', async () => {
      expect(await store.migrationsApplied()).toBe(true);
      expect(await target.appliedVersions()).toEqual(ALL_VERSIONS);
    });

    it('are idempotent: opening the same database again applies nothing', async () => {
      await store.keys.create(newKey(1));
      await store.close();
      store = await target.open(clock);
      expect(await target.appliedVersions()).toEqual(ALL_VERSIONS);
      expect(await store.migrationsApplied()).toBe(true);
      expect(await store.keys.get('key_0001')).toBeDefined();
    });

    it('refuse a database migrated by a newer build', async () => {
      await store.close();
      await target.recordVersion(999);
      await expect(target.open(clock)).rejects.toMatchObject({
        code: 'STORE_SCHEMA_TOO_NEW',
        kind: 'failed_precondition',
      });
    });
  });

  describe('lifecycle', () => {
    it('pings while open; close is safe twice and later use throws STORE_CLOSED', async () => {
      await store.ping();
      await store.close();
      await store.close();
      await expect(store.ping()).rejects.toMatchObject({ code: 'STORE_CLOSED', retryable: true });
      await expect(store.keys.get('key_0001')).rejects.toMatchObject({ code: 'STORE_CLOSED' });
    });
  });

  describe('api keys', () => {
    it('creates and reads a key by id and by secret hash, omitting absent fields', async () => {
      const created = await store.keys.create(
        newKey(1, { roles: ['editor', 'ingest'], labels: { team: 'search', env: 'prod' } }),
      );
      const expected = {
        id: 'key_0001',
        project: 'alpha',
        name: 'key 1',
        roles: ['editor', 'ingest'],
        labels: { team: 'search', env: 'prod' },
        prefix: 'tsk_k1',
        createdAt: iso(T0 + 1000),
      };
      expect(created).toStrictEqual(expected);
      expect(await store.keys.get('key_0001')).toStrictEqual(expected);
      expect(await store.keys.getBySecretHash('hash-1')).toStrictEqual(expected);
      expect(await store.keys.get('key_nope')).toBeUndefined();
      expect(await store.keys.getBySecretHash('hash-nope')).toBeUndefined();
    });

    it('keeps optional times', async () => {
      const expiresAt = '2027-01-01T00:00:00.000Z';
      await store.keys.create(newKey(1, { expiresAt }));
      expect((await store.keys.get('key_0001'))?.expiresAt).toBe(expiresAt);
    });

    it('refuses a duplicate id or secret hash with ALREADY_EXISTS', async () => {
      await store.keys.create(newKey(1));
      await expect(store.keys.create(newKey(1, { secretHash: 'other' }))).rejects.toMatchObject({
        code: 'ALREADY_EXISTS',
      });
      const dup = store.keys.create(newKey(2, { secretHash: 'hash-1' }));
      await expect(dup).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      await expect(dup).rejects.not.toThrow(/hash-1/);
      expect(await store.keys.get('key_0002')).toBeUndefined();
    });

    it('lists by project in creation order, page by page', async () => {
      // Keys 3 and 4 share a creation time: the id breaks the tie, so paging loses neither.
      for (const n of [5, 1, 4, 2, 3]) {
        await store.keys.create(newKey(n, n === 4 ? { createdAt: iso(T0 + 3000) } : {}));
      }
      await store.keys.create(newKey(6, { project: 'beta' }));
      await store.keys.create(newKey(7, { project: 'beta' }));

      const seen: string[] = [];
      let token: string | undefined;
      let pages = 0;
      do {
        const page = await store.keys.list('alpha', { pageSize: 2, pageToken: token });
        expect(page.items.length).toBeLessThanOrEqual(2);
        seen.push(...page.items.map((k) => k.id));
        token = page.nextPageToken;
        pages++;
      } while (token !== undefined && pages < 10);
      expect(seen).toEqual(['key_0001', 'key_0002', 'key_0003', 'key_0004', 'key_0005']);
      expect(pages).toBe(3);

      const beta = await store.keys.list('beta', { pageSize: 10 });
      expect(beta.items.map((k) => k.id)).toEqual(['key_0006', 'key_0007']);
      expect(beta.nextPageToken).toBeUndefined();

      const all = await store.keys.list(undefined, { pageSize: 100 });
      expect(all.items).toHaveLength(7);

      const exact = await store.keys.list('alpha', { pageSize: 5 });
      expect(exact.items).toHaveLength(5);
      expect(exact.nextPageToken).toBeUndefined();
    });

    it('rejects a malformed page token or page size with INVALID_ARGUMENT', async () => {
      await expect(
        store.keys.list('alpha', { pageSize: 2, pageToken: 'not-a-token' }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(store.keys.list('alpha', { pageSize: 0 })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    });

    it('revokes: keeps the first time, still finds the key by hash, false for unknown ids', async () => {
      await store.keys.create(newKey(1));
      expect(await store.keys.revoke('key_0001', iso(T0 + 10_000))).toBe(true);
      expect(await store.keys.revoke('key_0001', iso(T0 + 20_000))).toBe(true);
      expect((await store.keys.get('key_0001'))?.revokedAt).toBe(iso(T0 + 10_000));
      expect((await store.keys.getBySecretHash('hash-1'))?.revokedAt).toBe(iso(T0 + 10_000));
      expect(await store.keys.revoke('key_nope', iso(T0))).toBe(false);
    });

    it('touch moves lastUsedAt forward only', async () => {
      await store.keys.create(newKey(1));
      await store.keys.touch('key_0001', iso(T0 + 60_000));
      expect((await store.keys.get('key_0001'))?.lastUsedAt).toBe(iso(T0 + 60_000));
      await store.keys.touch('key_0001', iso(T0 + 30_000));
      expect((await store.keys.get('key_0001'))?.lastUsedAt).toBe(iso(T0 + 60_000));
      await store.keys.touch('key_0001', iso(T0 + 120_000));
      expect((await store.keys.get('key_0001'))?.lastUsedAt).toBe(iso(T0 + 120_000));
      await store.keys.touch('key_nope', iso(T0));
    });

    it('rejects a time that is not RFC 3339', async () => {
      await expect(store.keys.create(newKey(1, { createdAt: 'yesterday' }))).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    });
  });

  describe('traces', () => {
    const span = (
      traceId: string,
      spanId: string,
      parent = '',
      extra: Partial<Span> = {},
    ): Span => ({
      traceId,
      spanId,
      parentSpanId: parent,
      name: parent === '' ? 'root' : 'child',
      kind: 1,
      startTimeUnixNano: `${T0}000000`,
      endTimeUnixNano: `${T0 + 5}000000`,
      attributes: { n: 1 },
      events: [],
      links: [],
      status: { code: 0, message: '' },
      resource: { 'service.name': 'svc' },
      scope: { name: 's', version: '1' },
      ...extra,
    });
    const T = 'a'.repeat(32);
    const rules = { graceMs: 2000, idleMs: 30_000, maxAgeMs: 300_000 };
    const normalized = (name: string, labels: Record<string, string> = {}) => ({
      record: { id: T, output: name },
      summary: {
        traceId: T,
        service: 'svc',
        name,
        startTime: iso(T0),
        durationMs: 5,
        steps: 1,
        error: false,
        labels,
      },
    });

    it('reads chunks written in one millisecond in the order they were written', async () => {
      // Twenty calls at one time: with keys ordered at random within a millisecond, the last
      // copy read would be any of them.
      for (let n = 0; n < 20; n++) {
        await store.traces.appendSpans(
          [
            {
              project: 'p',
              traceId: T,
              spans: [span(T, '1'.repeat(16), '', { name: `copy ${n}` })],
              labels: {},
              source: '',
            },
          ],
          T0,
        );
      }
      const [only] = await store.traces.spans('p', T);
      expect(only?.name).toBe('copy 19');
    });

    it('stores span chunks, replaces a span sent again, and keeps bytes', async () => {
      await store.withTransaction((tx) =>
        tx.traces.appendSpans(
          [
            {
              project: 'p',
              traceId: T,
              spans: [span(T, '1'.repeat(16)), span(T, '2'.repeat(16), '1'.repeat(16))],
              labels: { k: 'v' },
              source: '',
            },
          ],
          T0,
        ),
      );
      const bytes = new Uint8Array([0, 255, 7]);
      await store.traces.appendSpans(
        [
          {
            project: 'p',
            traceId: T,
            spans: [
              span(T, '2'.repeat(16), '1'.repeat(16), {
                name: 'again',
                attributes: { raw: bytes },
              }),
            ],
            labels: {},
            source: '',
          },
        ],
        T0 + 1,
      );
      const spans = await store.traces.spans('p', T);
      expect(spans).toHaveLength(2);
      const again = spans.find((s) => s.spanId === '2'.repeat(16));
      expect(again?.name).toBe('again');
      expect(again?.attributes.raw).toEqual(bytes);
      expect(await store.traces.spans('other', T)).toEqual([]);
    });

    it('stores a resource once however many spans and traces share it, and reads it into each', async () => {
      // Bytes survive when redaction is off (it drops them otherwise).
      const resource = {
        'service.name': 'svc',
        'host.tags': 'r'.repeat(20_000),
        raw: new Uint8Array([9, 0]),
      };
      const many = (traceId: string, from: number) =>
        Array.from({ length: 100 }, (_, i) =>
          span(
            traceId,
            (from + i).toString(16).padStart(16, '0'),
            from === 1 && i === 0 ? '' : 'f'.repeat(16),
            {
              resource,
            },
          ),
        );
      const U = 'b'.repeat(32);
      const batch = (project: string, traceId: string, from: number) => ({
        project,
        traceId,
        spans: many(traceId, from),
        labels: {},
        source: '',
      });
      await store.traces.appendSpans([batch('p', T, 1), batch('p', U, 1)], T0);
      await store.traces.appendSpans([batch('p', T, 101), batch('q', T, 1)], T0 + 1);

      const stored = await target.query(
        'select project, length(attributes) as n from span_resources order by project',
      );
      expect(stored.map((r) => [r.project, Number(r.n)])).toEqual([
        ['p', expect.any(Number)],
        ['q', expect.any(Number)],
      ]);
      const [largest] = await target.query('select max(length(spans)) as n from span_chunks');
      // 100 spans of a few hundred bytes each, not 100 copies of the resource.
      expect(Number(largest?.n)).toBeLessThan(100 * 1000);

      const [t, u] = await store.traces.spansOf([
        { project: 'p', traceId: T },
        { project: 'p', traceId: U },
      ]);
      expect(t).toHaveLength(200);
      expect(u).toHaveLength(100);
      for (const read of [...(t ?? []), ...(u ?? [])]) expect(read.resource).toEqual(resource);
      expect(t?.[0]).toEqual(span(T, (1).toString(16).padStart(16, '0'), '', { resource }));
      expect(t?.[0]).not.toHaveProperty('resourceRef');
      expect(await store.traces.spans('q', T)).toHaveLength(100);
    });

    it("keeps a trace's root resource once when large, and inline when small", async () => {
      const large = { 'service.name': 'svc', 'host.tags': 'r'.repeat(20_000) };
      const small = { 'service.name': 'svc' };
      const U = 'b'.repeat(32);
      for (const [traceId, resource] of [
        [T, large],
        [U, large],
        ['c'.repeat(32), small],
      ] as const) {
        await store.traces.appendSpans(
          [
            {
              project: 'p',
              traceId,
              spans: [span(traceId, '1'.repeat(16))],
              labels: {},
              source: '',
            },
          ],
          T0,
        );
        const [due] = await store.traces.dueForCompletion(T0 + 2000, rules, 1);
        const root = { attributes: { n: 1 }, resource };
        const trace = { ...normalized('x'), root };
        expect((await store.traces.complete(due!, trace, 'd1', T0 + 2000)).completed).toBe(true);
        expect((await store.traces.get('p', traceId))?.root).toEqual(root);
      }
      const [longest] = await target.query('select max(length(root)) as n from traces');
      expect(Number(longest?.n)).toBeLessThan(1000);
      const [rows] = await target.query('select count(*) as n from span_resources');
      // The spans' resource and the large root resource (one row for both traces).
      expect(Number(rows?.n)).toBe(2);
    });

    it('stores a large batch as several chunks, pausing between slices, and reads it whole', async () => {
      const text = 'The flight to Paris leaves at seven. '.repeat(30);
      const spans = Array.from({ length: 2500 }, (_, i) =>
        span(T, (i + 1).toString(16).padStart(16, '0'), i === 0 ? '' : '1'.repeat(16), {
          attributes: { text },
        }),
      );
      // The same span id later in the batch (a retry inside one request) still wins.
      spans.push(span(T, spans[0]!.spanId, '', { name: 'last' }));
      let pauses = 0;
      await store.withTransaction((tx) =>
        tx.traces.appendSpans(
          [
            {
              project: 'p',
              traceId: T,
              spans,
              detachedEvents: [
                {
                  spanId: spans[1]!.spanId,
                  events: [{ name: 'e', timeUnixNano: '1', attributes: {} }],
                },
              ],
              labels: {},
              source: '',
            },
          ],
          T0,
          {
            pause: async () => {
              pauses++;
            },
          },
        ),
      );
      // 2.9 MB of span JSON: three chunks, a pause per MiB encoded and per MiB written.
      expect(pauses).toBeGreaterThanOrEqual(4);
      const [chunks] = await target.query('select count(*) as n from span_chunks');
      expect(Number(chunks?.n)).toBe(3);
      const read = await store.traces.spans('p', T);
      expect(read).toHaveLength(2500);
      expect(read[0]?.name).toBe('last');
      expect(read[1]?.events).toHaveLength(1);
      expect(read.map((s) => s.spanId)).toEqual(spans.slice(0, 2500).map((s) => s.spanId));
    });

    it('reads chunks written before resources were stored apart (each span holding its own)', async () => {
      const old = [span(T, '1'.repeat(16)), span(T, '2'.repeat(16), '1'.repeat(16))];
      await target.query(
        'insert into span_chunks (project, trace_id, chunk, spans) values (?, ?, ?, ?)',
        ['p', T, '0000000000001-old', JSON.stringify(old)],
      );
      await store.traces.appendSpans(
        [
          {
            project: 'p',
            traceId: T,
            spans: [
              span(T, '3'.repeat(16), '1'.repeat(16), { resource: { 'service.name': 'new' } }),
            ],
            labels: {},
            source: '',
          },
        ],
        T0,
      );
      expect(await store.traces.spans('p', T)).toEqual([
        ...old,
        span(T, '3'.repeat(16), '1'.repeat(16), { resource: { 'service.name': 'new' } }),
      ]);
    });

    it('round-trips every field of a span in the compact chunk format (2), bytes included', async () => {
      const full = span(T, '2'.repeat(16), '1'.repeat(16), {
        name: 'chat "x" \u2028 ✓',
        kind: 3,
        startTimeUnixNano: '1767225600000000001',
        attributes: {
          s: 'v',
          n: 1.5,
          big: '9007199254740993',
          b: false,
          raw: new Uint8Array([0, 255]),
          list: ['x', 2, new Uint8Array([7])],
          map: { inner: { deep: 'y' } },
        },
        events: [
          { name: 'e1', timeUnixNano: '5', attributes: { raw: new Uint8Array([3]) } },
          { name: 'e2', timeUnixNano: '6', attributes: {}, droppedAttributesCount: 2 },
        ],
        links: [
          { traceId: 'b'.repeat(32), spanId: 'c'.repeat(16), attributes: { k: 'v' } },
          {
            traceId: 'd'.repeat(32),
            spanId: 'e'.repeat(16),
            attributes: {},
            droppedAttributesCount: 1,
          },
        ],
        status: { code: 2, message: 'boom' },
        resource: { 'service.name': 'svc', raw: new Uint8Array([1]) },
        scope: { name: 'openinference', version: '1.2' },
        droppedAttributesCount: 4,
        droppedLinksCount: 6,
      });
      const root = span(T, '1'.repeat(16), '', { scope: { name: 'other', version: '' } });
      const detachedEvents = [
        {
          spanId: root.spanId,
          events: [{ name: 'gen_ai.choice', timeUnixNano: '7', attributes: {} }],
        },
      ];
      await store.traces.appendSpans(
        [{ project: 'p', traceId: T, spans: [full, root], detachedEvents, labels: {}, source: '' }],
        T0,
      );
      expect(await target.query('select format from span_chunks')).toEqual([{ format: 2 }]);
      expect(await store.traces.spans('p', T)).toEqual([
        full,
        { ...root, events: detachedEvents[0]!.events },
      ]);
    });

    it('reads a trace whose chunks are of every format, a span sent again replacing the earlier copy', async () => {
      const resource = { 'service.name': 'named' };
      const resourceJson = JSON.stringify(resource);
      await target.query('insert into span_resources (project, id, attributes) values (?, ?, ?)', [
        'p',
        'r'.repeat(64),
        resourceJson,
      ]);
      // Before migration 11: each span holds its resource. Then format 1 naming it by id. Both
      // inserted as those builds did, without the format column (its default, 1).
      const old = span(T, '1'.repeat(16), '', { name: 'old root' });
      const named = span(T, '2'.repeat(16), '1'.repeat(16), { name: 'stale' });
      const { resource: _r, ...namedEntry } = named;
      await target.query(
        'insert into span_chunks (project, trace_id, chunk, spans) values (?, ?, ?, ?), (?, ?, ?, ?)',
        [
          'p',
          T,
          '0000000000001-old',
          JSON.stringify([old]),
          'p',
          T,
          '0000000000002-v1',
          JSON.stringify([
            { ...namedEntry, resourceRef: 'r'.repeat(64) },
            { eventsOf: old.spanId, events: [{ name: 'ev', timeUnixNano: '1', attributes: {} }] },
          ]),
        ],
      );
      const fromV1 = await store.traces.spans('p', T);
      expect(fromV1).toEqual([
        { ...old, events: [{ name: 'ev', timeUnixNano: '1', attributes: {} }] },
        { ...named, resource },
      ]);
      // Format 2: the span named in format 1 sent again, and a new one.
      const again = span(T, '2'.repeat(16), '1'.repeat(16), { name: 'fresh' });
      const added = span(T, '3'.repeat(16), '1'.repeat(16), { resource });
      await store.traces.appendSpans(
        [{ project: 'p', traceId: T, spans: [again, added], labels: {}, source: '' }],
        T0,
      );
      const formats = await target.query('select format from span_chunks order by chunk');
      expect(formats.map((r) => Number(r.format))).toEqual([1, 1, 2]);
      const read = await store.traces.spans('p', T);
      expect(read).toEqual([
        { ...old, events: [{ name: 'ev', timeUnixNano: '1', attributes: {} }] },
        again,
        added,
      ]);
      // A span read from format 2 serializes as one read from format 1 (the API's span JSON).
      expect(JSON.stringify(read[1])).toBe(
        JSON.stringify({ ...fromV1[1], name: 'fresh', resource: again.resource }),
      );
    });

    it('refuses to read a chunk in a format newer than it knows', async () => {
      await store.traces.appendSpans(
        [{ project: 'p', traceId: T, spans: [span(T, '1'.repeat(16))], labels: {}, source: '' }],
        T0,
      );
      await target.query('update span_chunks set format = 3');
      await expect(store.traces.spans('p', T)).rejects.toMatchObject({
        code: 'STORE_SCHEMA_TOO_NEW',
      });
    });

    it('stores detached events apart and adds them to their span when it is read, whichever came first', async () => {
      const root = '1'.repeat(16);
      const chat = '2'.repeat(16);
      const event = (content: string, at: number) => ({
        name: 'gen_ai.user.message',
        timeUnixNano: `${at}000000`,
        attributes: { content, raw: new Uint8Array([1]) },
      });
      const events = (spanId: string, ...list: ReturnType<typeof event>[]) => ({
        project: 'p',
        traceId: T,
        spans: [],
        detachedEvents: [{ spanId, events: list }],
        labels: { from: 'logs' },
        source: '',
      });
      // Events first: they open the trace, but are no root: only idleness completes it.
      await store.traces.appendSpans([events(chat, event('hi', T0 + 2))], T0 + 100);
      expect(await store.traces.countOpen()).toBe(1);
      expect(await store.traces.spans('p', T)).toEqual([]);
      expect(await store.traces.dueForCompletion(T0 + 100 + rules.graceMs, rules, 10)).toEqual([]);
      expect(
        (await store.traces.dueForCompletion(T0 + 100 + rules.idleMs, rules, 10)).map(
          (d) => d.labels,
        ),
      ).toEqual([{ from: 'logs' }]);

      // The span, then more events for it (one a retry of the first) and for a span not yet here.
      await store.traces.appendSpans(
        [{ project: 'p', traceId: T, spans: [span(T, chat, root)], labels: {}, source: '' }],
        T0 + 200,
      );
      await store.traces.appendSpans(
        [
          events(chat, event('hi', T0 + 2), event('again', T0 + 3)),
          events('3'.repeat(16), event('later', T0 + 4)),
        ],
        T0 + 300,
      );
      const [read] = await store.traces.spansOf([{ project: 'p', traceId: T }]);
      expect(read).toHaveLength(1);
      expect(read?.[0]?.events.map((e) => e.attributes.content)).toEqual(['hi', 'again']);
      expect(read?.[0]?.events[0]?.attributes.raw).toEqual(new Uint8Array([1]));

      // The span it waited for arrives: its event is read with it.
      await store.traces.appendSpans(
        [
          {
            project: 'p',
            traceId: T,
            spans: [span(T, '3'.repeat(16), root)],
            labels: {},
            source: '',
          },
        ],
        T0 + 400,
      );
      const spans = await store.traces.spans('p', T);
      expect(spans.find((s) => s.spanId === '3'.repeat(16))?.events).toEqual([
        event('later', T0 + 4),
      ]);
    });

    it('finds traces due by grace after the root, idle timeout or max age; completes them conditionally', async () => {
      const U = 'b'.repeat(32);
      await store.traces.appendSpans(
        [
          {
            project: 'p',
            traceId: T,
            spans: [span(T, '1'.repeat(16))],
            labels: { key: 'k' },
            source: 'src',
          },
        ],
        T0,
      );
      await store.traces.appendSpans(
        [
          {
            project: 'p',
            traceId: U,
            spans: [span(U, '3'.repeat(16), '4'.repeat(16))],
            labels: {},
            source: '',
          },
        ],
        T0,
      );
      expect(await store.traces.countOpen()).toBe(2);
      expect(await store.traces.dueForCompletion(T0 + 1999, rules, 10)).toEqual([]);
      const due = await store.traces.dueForCompletion(T0 + 2000, rules, 10);
      expect(due).toEqual([
        {
          project: 'p',
          traceId: T,
          lastSpanAt: T0,
          labels: { key: 'k' },
          source: 'src',
          digest: '',
        },
      ]);
      expect(
        (await store.traces.dueForCompletion(T0 + 30_000, rules, 10)).map((d) => d.traceId).sort(),
      ).toEqual([T, U]);

      // A span arriving after the read makes the completion a no-op.
      await store.traces.appendSpans(
        [
          {
            project: 'p',
            traceId: T,
            spans: [span(T, '5'.repeat(16), '1'.repeat(16))],
            labels: { key: 'k' },
            source: 'src',
          },
        ],
        T0 + 2100,
      );
      expect(await store.traces.complete(due[0]!, normalized('x'), 'd1', T0 + 2200)).toEqual({
        completed: false,
        changed: false,
      });
      const [fresh] = await store.traces.dueForCompletion(T0 + 4200, rules, 1);
      expect(
        await store.traces.complete(fresh!, normalized('x', { env: 'prod' }), 'd1', T0 + 4200),
      ).toEqual({ completed: true, changed: true });
      expect(await store.traces.countOpen()).toBe(1);
      const got = await store.traces.get('p', T);
      expect(got?.trace).toMatchObject({
        traceId: T,
        project: 'p',
        name: 'x',
        source: 'src',
        digest: 'd1',
        labels: { env: 'prod' },
      });
      expect(got?.record).toEqual({ id: T, output: 'x' });

      // Re-opened by a late span; the same content completes with changed=false.
      await store.traces.appendSpans(
        [
          {
            project: 'p',
            traceId: T,
            spans: [span(T, '5'.repeat(16), '1'.repeat(16))],
            labels: { key: 'k' },
            source: 'src',
          },
        ],
        T0 + 5000,
      );
      expect(await store.traces.get('p', T)).toBeUndefined();
      const [late] = await store.traces.dueForCompletion(T0 + 7000, rules, 1);
      expect(
        await store.traces.complete(late!, normalized('x', { env: 'prod' }), 'd1', T0 + 7000),
      ).toEqual({ completed: true, changed: false });
    });

    it('stores a whole trace complete on arrival when it has no row; re-opens one that has', async () => {
      const whole = (name: string, digest: string) => ({
        trace: {
          ...normalized(name, { env: 'prod' }),
          root: { attributes: { a: 1 }, resource: { 'service.name': 'svc' } },
        },
        digest,
      });
      const batch = (traceId: string, extra: Partial<SpanBatch> = {}): SpanBatch => ({
        project: 'p',
        traceId,
        spans: [span(traceId, '1'.repeat(16))],
        labels: { key: 'k' },
        source: '',
        ...extra,
      });
      const U = 'b'.repeat(32);
      const V = 'c'.repeat(32);
      const W = 'd'.repeat(32);
      const first = await store.withTransaction((tx) =>
        tx.traces.appendSpans(
          [
            batch(T, { whole: whole('w', 'dw') }),
            // Not whole: opened as before.
            batch(U),
            // Two batches of one trace in a call: their union is left to the completer.
            batch(V, { whole: whole('v', 'dv') }),
            batch(V, { spans: [span(V, '2'.repeat(16), '1'.repeat(16))], whole: whole('v', 'dv') }),
          ],
          T0,
        ),
      );
      expect(first).toEqual({
        completed: [{ project: 'p', traceId: T, digest: 'dw', firstSeenAt: T0 }],
      });
      expect(await store.traces.countOpen()).toBe(2);
      const got = await store.traces.get('p', T);
      expect(got?.trace).toEqual({
        traceId: T,
        project: 'p',
        service: 'svc',
        name: 'w',
        startTime: iso(T0),
        durationMs: 5,
        steps: 1,
        error: false,
        labels: { env: 'prod' },
        source: '',
        digest: 'dw',
        completedAt: iso(T0),
      });
      expect(got?.record).toEqual({ id: T, output: 'w' });
      expect(got?.root).toEqual({ attributes: { a: 1 }, resource: { 'service.name': 'svc' } });
      expect(
        (await store.traces.list({ project: 'p' }, { pageSize: 10 })).items.map((t) => t.traceId),
      ).toEqual([T]);
      expect(await store.traces.dueForCompletion(T0 + 300_000, rules, 10)).not.toContainEqual(
        expect.objectContaining({ traceId: T }),
      );

      // The same batch again (an exporter's retry), and a whole batch for a trace already open:
      // both re-open, nothing is completed on arrival, the completer completes them.
      const again = await store.traces.appendSpans(
        [batch(T, { whole: whole('w', 'dw') }), batch(U, { whole: whole('u', 'du') })],
        T0 + 100,
      );
      expect(again).toEqual({ completed: [] });
      expect(await store.traces.get('p', T)).toBeUndefined();
      expect(await store.traces.get('p', U)).toBeUndefined();
      const due = await store.traces.dueForCompletion(T0 + 2100, rules, 10);
      expect(due.map((d) => [d.traceId, d.lastSpanAt, d.digest]).sort()).toEqual([
        [T, T0 + 100, 'dw'],
        [U, T0 + 100, ''],
        [V, T0, ''],
      ]);
      const [reopened] = due.filter((d) => d.traceId === T);
      expect(await store.traces.complete(reopened!, normalized('w'), 'dw', T0 + 2100)).toEqual({
        completed: true,
        changed: false,
      });

      // A whole trace with a large root resource keeps it once, by reference, as `complete` does.
      const large = { 'service.name': 'svc', blob: 'x'.repeat(5000) };
      await store.traces.appendSpans(
        [
          batch(W, {
            whole: {
              trace: { ...normalized('big'), root: { attributes: {}, resource: large } },
              digest: 'db',
            },
          }),
        ],
        T0 + 200,
      );
      expect((await store.traces.get('p', W))?.root).toEqual({ attributes: {}, resource: large });
    });

    it("keeps a whole trace's spans in its own row; spans that reach it later are read after them", async () => {
      const U = 'b'.repeat(32);
      const root = span(T, '1'.repeat(16));
      const batch = (traceId: string, spans: Span[], whole?: SpanBatch['whole']): SpanBatch => ({
        project: 'p',
        traceId,
        spans,
        labels: {},
        source: '',
        ...(whole === undefined ? {} : { whole }),
      });
      await store.traces.appendSpans(
        [
          batch(T, [root], { trace: normalized('w'), digest: 'dw' }),
          batch(U, [span(U, '1'.repeat(16))]),
        ],
        T0,
      );
      // No chunk row of its own for the whole trace; the open one's spans are a chunk as before.
      expect(await target.query('select trace_id from span_chunks')).toEqual([{ trace_id: U }]);
      expect(await target.query('select trace_id from traces where spans is not null')).toEqual([
        { trace_id: T },
      ]);
      expect(
        await store.traces.spansOf([
          { project: 'p', traceId: T },
          { project: 'p', traceId: U },
        ]),
      ).toEqual([[root], [span(U, '1'.repeat(16))]]);

      // Sent again with its root renamed and a child: re-opened, the new copy replaces the first.
      const renamed = { ...root, name: 'renamed' };
      const child = span(T, '2'.repeat(16), '1'.repeat(16));
      const again = await store.traces.appendSpans(
        [batch(T, [renamed, child], { trace: normalized('w2'), digest: 'dw2' })],
        T0 + 100,
      );
      expect(again).toEqual({ completed: [] });
      expect(
        await target.query('select trace_id from span_chunks where trace_id = ?', [T]),
      ).toHaveLength(1);
      expect(await store.traces.spans('p', T)).toEqual([renamed, child]);
      const due = await store.traces.dueForCompletion(T0 + 2100, rules, 10);
      expect(due.map((d) => d.traceId).sort()).toEqual([T, U]);
    });

    it("keys a work item by its trace's first-seen time, which the trace keeps when re-opened", async () => {
      const open = (at: number) =>
        store.traces.appendSpans(
          [{ project: 'p', traceId: T, spans: [span(T, '1'.repeat(16))], labels: {}, source: '' }],
          at,
        );
      const item = (digest: string) => ({
        project: 'p',
        traceId: T,
        digest,
        policy: '',
        replace: false,
        traceCompletedAt: T0 + 5000,
      });
      await open(T0);
      await open(T0 + 1000);
      expect(await store.work.enqueue([item('d1'), item('d2')], T0 + 5000)).toBe(2);
      // The same (trace, digest, policy) is still one item: the trace's time is the same, read
      // from its row or given (as for a trace stored complete on arrival).
      expect(await store.work.enqueue([item('d1')], T0 + 6000)).toBe(0);
      expect(
        await store.work.enqueue(
          [
            { ...item('d1'), traceFirstSeenAt: T0 },
            { ...item('d3'), traceFirstSeenAt: T0 },
          ],
          T0 + 6000,
        ),
      ).toBe(1);
      const rows = await target.query(
        'select digest, trace_first_seen_at from work_items order by digest',
      );
      expect(rows.map((r) => [r.digest, Number(r.trace_first_seen_at)])).toEqual([
        ['d1', T0],
        ['d2', T0],
        ['d3', T0],
      ]);
    });

    it('does not complete from a read older than a completion in between, even with the same last span time', async () => {
      const open = () =>
        store.traces.appendSpans(
          [{ project: 'p', traceId: T, spans: [span(T, '1'.repeat(16))], labels: {}, source: '' }],
          T0,
        );
      await open();
      const [stale] = await store.traces.dueForCompletion(T0 + 2000, rules, 1);
      const [current] = await store.traces.dueForCompletion(T0 + 2000, rules, 1);
      expect(await store.traces.complete(current!, normalized('a'), 'd1', T0 + 2000)).toEqual({
        completed: true,
        changed: true,
      });
      // Re-opened within the same millisecond: last_span_at is what the stale read saw.
      await open();
      expect(stale?.digest).toBe('');
      expect(await store.traces.complete(stale!, normalized('b'), 'd2', T0 + 2000)).toEqual({
        completed: false,
        changed: false,
      });
      const [fresh] = await store.traces.dueForCompletion(T0 + 2000, rules, 1);
      expect(fresh?.digest).toBe('d1');
      expect(await store.traces.complete(fresh!, normalized('b'), 'd2', T0 + 2000)).toEqual({
        completed: true,
        changed: true,
      });
    });

    it('lists completed traces newest first, filtered and paged', async () => {
      for (let i = 0; i < 5; i++) {
        const id = String(i).repeat(32);
        const start = T0 + i * 1000;
        await store.traces.appendSpans(
          [
            {
              project: 'p',
              traceId: id,
              spans: [span(id, '1'.repeat(16))],
              labels: {},
              source: '',
            },
          ],
          T0,
        );
        const [due] = await store.traces.dueForCompletion(T0 + 10_000, rules, 1);
        await store.traces.complete(
          due!,
          {
            record: { id },
            summary: {
              traceId: id,
              service: i % 2 === 0 ? 'even' : 'odd',
              name: `n${i}`,
              startTime: iso(start),
              durationMs: 1,
              steps: 1,
              error: i === 3,
              labels: { i: String(i), tier: i < 2 ? 'gold' : 'free' },
            },
          },
          'd',
          T0 + 10_000,
        );
      }
      const all = await store.traces.list({ project: 'p' }, { pageSize: 2 });
      expect(all.items.map((t) => t.name)).toEqual(['n4', 'n3']);
      const next = await store.traces.list(
        { project: 'p' },
        { pageSize: 2, pageToken: all.nextPageToken! },
      );
      expect(next.items.map((t) => t.name)).toEqual(['n2', 'n1']);
      expect(
        (await store.traces.list({ project: 'p', service: 'even' }, { pageSize: 10 })).items.map(
          (t) => t.name,
        ),
      ).toEqual(['n4', 'n2', 'n0']);
      expect(
        (
          await store.traces.list({ project: 'p', labels: { tier: 'gold' } }, { pageSize: 10 })
        ).items.map((t) => t.name),
      ).toEqual(['n1', 'n0']);
      expect(
        (await store.traces.list({ project: 'p', error: true }, { pageSize: 10 })).items.map(
          (t) => t.name,
        ),
      ).toEqual(['n3']);
      expect(
        (
          await store.traces.list(
            { project: 'p', since: iso(T0 + 1000), until: iso(T0 + 3000) },
            { pageSize: 10 },
          )
        ).items.map((t) => t.name),
      ).toEqual(['n2', 'n1']);
      expect(
        (await store.traces.list({ project: 'p', services: ['odd'] }, { pageSize: 10 })).items.map(
          (t) => t.name,
        ),
      ).toEqual(['n3', 'n1']);
      expect(
        (await store.traces.list({ project: 'p', services: [] }, { pageSize: 10 })).items,
      ).toEqual([]);
      expect((await store.traces.list({ project: 'q' }, { pageSize: 10 })).items).toEqual([]);
    });
  });

  describe('leases', () => {
    it('is taken when free, refused while held, renewed by its holder, released', async () => {
      expect(await store.leases.acquire('source/a', 'replica-1', 120_000)).toBe(true);
      expect(await store.leases.get('source/a')).toStrictEqual({
        holder: 'replica-1',
        expiresAt: iso(T0 + 120_000),
        acquiredAt: iso(T0),
      });
      expect(await store.leases.acquire('source/a', 'replica-2', 120_000)).toBe(false);

      clock.advance(60_000);
      expect(await store.leases.acquire('source/a', 'replica-1', 120_000)).toBe(true);
      expect(await store.leases.get('source/a')).toStrictEqual({
        holder: 'replica-1',
        expiresAt: iso(T0 + 180_000),
        acquiredAt: iso(T0),
      });

      // Another lease name is independent.
      expect(await store.leases.acquire('dispatcher', 'replica-2', 1_000)).toBe(true);

      await store.leases.release('source/a', 'replica-2');
      expect((await store.leases.get('source/a'))?.holder).toBe('replica-1');
      await store.leases.release('source/a', 'replica-1');
      expect(await store.leases.get('source/a')).toBeUndefined();
      expect(await store.leases.acquire('source/a', 'replica-2', 1_000)).toBe(true);
    });

    it('is taken over once expired, and the old holder is then refused', async () => {
      expect(await store.leases.acquire('source/a', 'replica-1', 120_000)).toBe(true);
      clock.advance(119_999);
      expect(await store.leases.acquire('source/a', 'replica-2', 120_000)).toBe(false);
      clock.advance(1);
      expect(await store.leases.acquire('source/a', 'replica-2', 120_000)).toBe(true);
      expect(await store.leases.get('source/a')).toStrictEqual({
        holder: 'replica-2',
        expiresAt: iso(T0 + 240_000),
        acquiredAt: iso(T0 + 120_000),
      });
      expect(await store.leases.acquire('source/a', 'replica-1', 120_000)).toBe(false);
    });

    it('lets exactly one of many racing holders win a free lease', async () => {
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) => store.leases.acquire('race', `replica-${i}`, 60_000)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results.indexOf(true);
      expect((await store.leases.get('race'))?.holder).toBe(`replica-${winner}`);
    });

    it('rejects a ttl that is not a positive integer', async () => {
      await expect(store.leases.acquire('x', 'h', 0)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      await expect(store.leases.acquire('x', 'h', 1.5)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    });
  });

  describe('transactions', () => {
    it('commit writes to several tables together and return the callback value', async () => {
      const out = await store.withTransaction(async (tx) => {
        await tx.keys.create(newKey(1));
        expect(await tx.leases.acquire('source/a', 'replica-1', 1_000)).toBe(true);
        expect(await tx.keys.get('key_0001')).toBeDefined();
        return 'done';
      });
      expect(out).toBe('done');
      expect(await store.keys.get('key_0001')).toBeDefined();
      expect((await store.leases.get('source/a'))?.holder).toBe('replica-1');
    });

    it('roll back every write when the callback throws, and rethrow its error', async () => {
      const boom = new Error('boom');
      await expect(
        store.withTransaction(async (tx) => {
          await tx.keys.create(newKey(1));
          await tx.leases.acquire('source/a', 'replica-1', 1_000);
          await tx.keys.revoke('key_0001', iso(T0));
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await store.keys.get('key_0001')).toBeUndefined();
      expect(await store.leases.get('source/a')).toBeUndefined();
    });

    it('roll back when a statement fails inside', async () => {
      await store.keys.create(newKey(1));
      await expect(
        store.withTransaction(async (tx) => {
          await tx.keys.create(newKey(2));
          await tx.keys.create(newKey(3, { secretHash: 'hash-1' }));
        }),
      ).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      expect(await store.keys.get('key_0002')).toBeUndefined();
    });

    it('refuse the store itself inside the callback instead of deadlocking', async () => {
      await expect(
        store.withTransaction(async (tx) => {
          await tx.keys.create(newKey(1));
          await store.keys.get('key_0001');
        }),
      ).rejects.toMatchObject({ code: 'STORE_TRANSACTION_MISUSE' });
      await expect(
        store.withTransaction(async () => store.withTransaction(async () => 1)),
      ).rejects.toMatchObject({ code: 'STORE_TRANSACTION_MISUSE' });
      // Rolled back, and the store works again afterwards.
      expect(await store.keys.get('key_0001')).toBeUndefined();
    });

    it('let other work proceed while one is open', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const tx = store.withTransaction(async (t) => {
        await t.keys.create(newKey(1));
        await gate;
      });
      const outside = store.keys.create(newKey(2));
      release();
      await Promise.all([tx, outside]);
      expect((await store.keys.list(undefined, { pageSize: 10 })).items).toHaveLength(2);
    });
  });

  describe('webhooks', () => webhookStoreContract(() => ({ store, clock })));
}

describe('store on SQLite', () => {
  storeContract(sqliteHarness);

  describe('SQLite specifics', () => {
    let root: string;
    beforeEach(() => {
      root = mkdtempSync(join(tmpdir(), 'touchstone-sqlite-'));
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    it('creates the data dir and one WAL-mode file named touchstone.db', async () => {
      const dataDir = join(root, 'nested', 'data');
      const store = await openStore(
        { driver: 'sqlite', pool_size: 10 },
        { clock: new FakeClock(), dataDir },
      );
      expect(store.dialect).toBe('sqlite');
      await store.close();
      const db = new BetterSqlite3(join(dataDir, 'touchstone.db'), { readonly: true });
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      db.close();
    });

    it('reads data_dir from a whole server config', async () => {
      const dataDir = join(root, 'from-config');
      const store = await openStore(
        { store: { driver: 'sqlite', pool_size: 10 }, data_dir: dataDir },
        { clock: new FakeClock() },
      );
      await store.close();
      const db = new BetterSqlite3(join(dataDir, 'touchstone.db'), { readonly: true });
      db.close();
    });

    it('reports a data dir that cannot be created as STORE_CONFIG_INVALID', async () => {
      const file = join(root, 'a-file');
      writeFileSync(file, '');
      await expect(
        openStore({ driver: 'sqlite' }, { clock: new FakeClock(), dataDir: join(file, 'data') }),
      ).rejects.toMatchObject({ code: 'STORE_CONFIG_INVALID' });
    });
  });
});

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 1));
    });
  });
}

/** The error as a log line would show it, causes included. */
function everything(err: unknown): string {
  return inspect(err, { depth: 10 }) + JSON.stringify(err);
}

describe.skipIf(PG_URL === undefined || PG_URL === '')('store on PostgreSQL', () => {
  const baseUrl = PG_URL ?? '';
  storeContract(pgHarness(baseUrl));

  describe('PostgreSQL specifics', () => {
    it('lets replicas starting together migrate once (advisory lock)', async () => {
      const target = await pgHarness(baseUrl).fresh();
      try {
        const stores = await Promise.all(
          Array.from({ length: 4 }, () => target.open(new FakeClock())),
        );
        expect(await target.appliedVersions()).toEqual(ALL_VERSIONS);
        for (const s of stores) expect(await s.migrationsApplied()).toBe(true);
        await Promise.all(stores.map((s) => s.close()));
      } finally {
        await target.cleanup();
      }
    });

    it('compresses large values with lz4 when the server has it, pglz otherwise', async () => {
      const target = await pgHarness(baseUrl).fresh();
      try {
        const store = await target.open(new FakeClock());
        // Incompressible text would be stored as is; repeated text of 8 KB is compressed.
        const big = 'the model answered at length. '.repeat(300);
        const traceId = 'c'.repeat(32);
        await store.withTransaction((tx) =>
          tx.traces.appendSpans(
            [
              {
                project: 'p',
                traceId,
                labels: {},
                source: '',
                spans: [
                  {
                    traceId,
                    spanId: 'd'.repeat(16),
                    parentSpanId: '',
                    name: 'root',
                    kind: 1,
                    startTimeUnixNano: '1700000000000000000',
                    endTimeUnixNano: '1700000000005000000',
                    attributes: { 'gen_ai.completion': big },
                    events: [],
                    links: [],
                    status: { code: 0, message: '' },
                    resource: { 'service.name': 'svc' },
                    scope: { name: 's', version: '1' },
                  },
                ],
              },
            ],
            1_700_000_000_000,
          ),
        );
        const [settings] = await target.query(
          "select enumvals from pg_settings where name = 'default_toast_compression'",
        );
        const [stored] = await target.query(
          'select pg_column_compression(spans) as method from span_chunks',
        );
        const lz4 = ((settings?.enumvals ?? []) as string[]).includes('lz4');
        expect(stored?.method).toBe(lz4 ? 'lz4' : 'pglz');
        await store.close();
      } finally {
        await target.cleanup();
      }
    });

    it('reports a wrong password as STORE_UNAVAILABLE without the password', async () => {
      const url = new URL(baseUrl);
      url.password = 'wrong-pw-QQQ';
      const err = await openStore(
        { driver: 'postgres', url: url.toString() },
        { clock: new FakeClock() },
      ).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect(everything(err)).not.toContain('wrong-pw-QQQ');
    });
  });
});

describe('opening a PostgreSQL store (no server needed)', () => {
  it('reports an unreachable server as STORE_UNAVAILABLE without the password', async () => {
    const port = await closedPort();
    const url = `postgres://touchstone:s3cret-pw-XYZ@127.0.0.1:${port}/db`;
    const err = await openStore({ driver: 'postgres', url }, { clock: new FakeClock() }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
    expect((err as Error).message).toContain(`127.0.0.1:${port}/db`);
    expect(everything(err)).not.toContain('s3cret-pw-XYZ');
  });

  it('reports a malformed URL as STORE_CONFIG_INVALID without echoing it', async () => {
    const err = await openStore(
      { driver: 'postgres', url: 'postgres://u:pass-WWW@db:99999999/db' },
      { clock: new FakeClock() },
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STORE_CONFIG_INVALID' });
    expect(everything(err)).not.toContain('ss-WWW');
  });

  it('requires store.url', async () => {
    await expect(
      openStore({ driver: 'postgres' }, { clock: new FakeClock() }),
    ).rejects.toMatchObject({ code: 'STORE_CONFIG_INVALID' });
  });
});
