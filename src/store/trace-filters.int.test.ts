import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  CompiledQuery,
  type Expression,
  Kysely,
  PostgresDialect,
  type SqlBool,
  SqliteDialect,
  sql,
} from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  freshPgSchema,
  PG_URL,
  pgHarness,
  type StoreHarness,
  type StoreTarget,
  sqliteHarness,
} from '../../test/support/stores.js';
import { FakeClock, type Span } from '../core/index.js';
import { openStore, type Store } from './index.js';
import { labelOrder } from './migrations/0018-label-order.js';
import { labelKeys } from './migrations/0021-label-keys.js';
import { MIGRATIONS } from './migrations/index.js';
import { KyselyResultStore } from './results.js';
import type { Database as Tables } from './schema.js';
import { SQLITE_FILE_NAME } from './sqlite/backend.js';
import {
  HASH_MAX,
  LEAD_MAX,
  leadingTraces,
  planLead,
  probesOf,
  resultsExist,
} from './trace-filters.js';
import { KyselyTraceStore } from './traces.js';

/**
 * The list filters that lead from their own index (migration 14): labels kept by triggers as
 * completion sets and changes them, filters matching nothing, and (SQLite) the plans of the
 * probes that decide, which must search an index rather than scan a table.
 */

const T0 = Date.parse('2026-03-01T00:00:00Z');
const traceId = (n: number) => n.toString(16).padStart(32, '0');

function span(id: string, at: number, spanId: string): Span {
  return {
    traceId: id,
    spanId,
    parentSpanId: '',
    name: 'root',
    kind: 1,
    startTimeUnixNano: `${at}000000`,
    endTimeUnixNano: `${at + 5}000000`,
    attributes: {},
    events: [],
    links: [],
    status: { code: 0, message: '' },
    resource: { 'service.name': 'svc' },
    scope: { name: 's', version: '1' },
  };
}

function contract(harness: StoreHarness): void {
  let target: StoreTarget;
  let store: Store;

  beforeEach(async () => {
    target = await harness();
    store = await target.open(new FakeClock(T0));
  });

  afterEach(async () => {
    await store.close();
    await target.cleanup();
  });

  /** Stores a span of the trace and completes it with these labels (a new digest each time). */
  async function complete(
    id: string,
    labels: Record<string, string>,
    opts: {
      at?: number;
      service?: string;
      source?: string;
      digest?: string;
      previous?: string;
    } = {},
  ): Promise<void> {
    const at = opts.at ?? T0;
    const now = at + (opts.previous === undefined ? 0 : 1);
    await store.traces.appendSpans(
      [
        {
          project: 'p',
          traceId: id,
          spans: [span(id, at, `${now}`.padStart(16, '0'))],
          labels: {},
          source: opts.source ?? '',
        },
      ],
      now,
    );
    const done = await store.traces.complete(
      {
        project: 'p',
        traceId: id,
        lastSpanAt: now,
        labels: {},
        source: opts.source ?? '',
        ...(opts.previous === undefined ? {} : { digest: opts.previous }),
      },
      {
        record: { id, output: 'out' },
        summary: {
          traceId: id,
          service: opts.service ?? 'svc',
          name: 'root',
          startTime: new Date(at).toISOString(),
          durationMs: 5,
          steps: 1,
          error: false,
          labels,
        },
      },
      opts.digest ?? 'd1',
      now,
    );
    expect(done.completed).toBe(true);
    await store.results.insert(
      {
        project: 'p',
        traceId: id,
        policy: 'quality',
        digest: opts.digest ?? 'd1',
        results: [
          {
            evaluator: 'exact',
            outcome: 'OUTCOME_SCORED',
            scores: [{ name: 'exact', value: 1 }],
            durationMs: 1,
          },
        ],
        scoredAt: now,
      },
      false,
    );
  }

  const traceIds = async (filter: Parameters<Store['traces']['list']>[0]) =>
    (await store.traces.list(filter, { pageSize: 10 })).items.map((t) => t.traceId);
  const scoredIds = async (filter: Parameters<Store['results']['list']>[0]) =>
    (await store.results.list(filter, { pageSize: 10 })).items.map((t) => t.trace.traceId);

  it('finds traces by the labels their completion set, and by new ones after a change', async () => {
    await complete(traceId(1), { team: 'a', env: 'prod' });
    await complete(traceId(2), { team: 'b', env: 'prod' }, { at: T0 + 10 });
    expect(await traceIds({ project: 'p', labels: { team: 'a' } })).toEqual([traceId(1)]);
    expect(await scoredIds({ project: 'p', labels: { team: 'b' } })).toEqual([traceId(2)]);
    await complete(traceId(1), { team: 'c', env: 'prod' }, { digest: 'd2', previous: 'd1' });
    expect(await traceIds({ project: 'p', labels: { team: 'a' } })).toEqual([]);
    expect(await traceIds({ project: 'p', labels: { team: 'c' } })).toEqual([traceId(1)]);
    expect(await scoredIds({ project: 'p', labels: { team: 'c', env: 'prod' } })).toEqual([
      traceId(1),
    ]);
    // Two labels leading together still check both, newest first.
    expect(await traceIds({ project: 'p', labels: { env: 'prod' } })).toEqual([
      traceId(2),
      traceId(1),
    ]);
  });

  it("reads a label's traces in each list's order, page by page, as their times move", async () => {
    // Start and score times shared by three traces each: the trace id breaks ties.
    for (let k = 0; k < 24; k++) {
      const labels: Record<string, string> = { env: k % 4 === 0 ? 'dev' : 'prod' };
      if (k % 3 !== 1) labels.team = 'a';
      await complete(traceId(k), labels, { at: T0 + Math.floor(k / 3) * 10 });
    }
    // A newer score moves a trace up the scores list; completing again with another start moves
    // it in the traces list (and its labels change).
    for (const k of [2, 9, 13]) {
      await store.results.insert(
        {
          project: 'p',
          traceId: traceId(k),
          policy: 'later',
          digest: 'd1',
          results: [{ evaluator: 'e', outcome: 'OUTCOME_SCORED', scores: [], durationMs: 1 }],
          scoredAt: T0 + 1_000 + (k % 2),
        },
        false,
      );
    }
    await complete(traceId(5), { env: 'dev', team: 'a' }, { digest: 'd2', previous: 'd1' });
    await complete(traceId(7), { env: 'prod' }, { at: T0 + 500, digest: 'd2', previous: 'd1' });

    const allTraces = (await store.traces.list({ project: 'p' }, { pageSize: 100 })).items;
    const allScored = (await store.results.list({ project: 'p' }, { pageSize: 100 })).items;
    expect(allTraces).toHaveLength(24);
    expect(allScored.slice(0, 3).map((e) => e.trace.traceId)).toEqual(
      [13, 9, 2].map((k) => traceId(k)),
    );
    expect(allTraces[0]?.traceId).toBe(traceId(7));
    const has = (labels: Record<string, string>, of: Record<string, string>) =>
      Object.entries(labels).every(([k, v]) => of[k] === v);
    for (const labels of <Record<string, string>[]>[
      { team: 'a' },
      { env: 'dev' },
      { env: 'prod', team: 'a' },
      { env: 'x' },
    ]) {
      const walkTraces = allTraces.filter((t) => has(labels, t.labels)).map((t) => t.traceId);
      const walkScored = allScored
        .filter((e) => has(labels, e.trace.labels))
        .map((e) => e.trace.traceId);
      for (const pageSize of [1, 4, 7]) {
        const traces: string[] = [];
        const scored: string[] = [];
        let token: string | undefined;
        do {
          const page = await store.traces.list(
            { project: 'p', labels },
            { pageSize, ...(token === undefined ? {} : { pageToken: token }) },
          );
          traces.push(...page.items.map((t) => t.traceId));
          token = page.nextPageToken;
        } while (token !== undefined);
        do {
          const page = await store.results.list(
            { project: 'p', labels },
            { pageSize, ...(token === undefined ? {} : { pageToken: token }) },
          );
          scored.push(...page.items.map((e) => e.trace.traceId));
          token = page.nextPageToken;
        } while (token !== undefined);
        expect(traces, JSON.stringify({ labels, pageSize })).toEqual(walkTraces);
        expect(scored, JSON.stringify({ labels, pageSize })).toEqual(walkScored);
      }
    }
    // With other filters: a window of start times, a score time, a policy.
    const since = T0 + 20;
    expect(
      await traceIds({ project: 'p', labels: { team: 'a' }, since: new Date(since).toISOString() }),
    ).toEqual(
      allTraces
        .filter((t) => t.labels.team === 'a' && Date.parse(t.startTime) >= since)
        .map((t) => t.traceId)
        .slice(0, 10),
    );
    expect(await scoredIds({ project: 'p', labels: { team: 'a' }, since: T0 + 1_000 })).toEqual(
      [9, 2].map((k) => traceId(k)),
    );
    expect(await scoredIds({ project: 'p', labels: { env: 'prod' }, policy: 'later' })).toEqual(
      [13, 9, 2].map((k) => traceId(k)),
    );
    expect(await scoredIds({ project: 'p', labels: { env: 'dev' }, policy: 'later' })).toEqual([]);
  });

  it('answers an empty page for filters that match nothing, and checks every other filter', async () => {
    await complete(traceId(1), { team: 'a' }, { service: 'checkout', source: 'mlflow' });
    await complete(traceId(2), { team: 'a' }, { at: T0 + 10 });
    for (const filter of [
      { labels: { team: 'nowhere' } },
      { evaluator: 'nowhere' },
      { policy: 'quality', evaluator: 'nowhere' },
      { service: 'nowhere' },
      { source: 'nowhere' },
      // Each matches a trace, but not the same one.
      { service: 'checkout', labels: { team: 'a' }, since: new Date(T0 + 5).toISOString() },
    ]) {
      expect(await traceIds({ project: 'p', ...filter })).toEqual([]);
    }
    for (const filter of [
      { labels: { team: 'nowhere' } },
      { evaluator: 'nowhere' },
      { service: 'nowhere' },
      { service: 'checkout', labels: { team: 'a' }, since: T0 + 5 },
    ]) {
      expect(await scoredIds({ project: 'p', ...filter })).toEqual([]);
    }
    expect(await traceIds({ project: 'p', service: 'checkout', evaluator: 'exact' })).toEqual([
      traceId(1),
    ]);
    expect(await traceIds({ project: 'p', source: 'mlflow' })).toEqual([traceId(1)]);
    expect(await traceIds({ project: 'p', source: '' })).toEqual([traceId(2)]);
    expect(await scoredIds({ project: 'p', policy: 'quality', labels: { team: 'a' } })).toEqual([
      traceId(2),
      traceId(1),
    ]);
  });
}

describe('leading list filters on SQLite', () => {
  contract(sqliteHarness('touchstone-trace-filters-'));
});

describe.skipIf(PG_URL === undefined || PG_URL === '')('leading list filters on PostgreSQL', () => {
  contract(pgHarness(PG_URL ?? ''));
});

describe('the plans of the leading probes on SQLite', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-trace-filters-plan-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** The store's SQLite file, migrated, opened by a connection of the test's own. */
  const migratedFile = async (
    onQuery?: (query: { sql: string; parameters: readonly unknown[] }) => void,
  ) => {
    const store = await openStore({ driver: 'sqlite' }, { clock: new FakeClock(T0), dataDir: dir });
    await store.close();
    const file = new Database(join(dir, SQLITE_FILE_NAME));
    const db = new Kysely<Tables>({
      dialect: new SqliteDialect({ database: file }),
      ...(onQuery === undefined
        ? {}
        : {
            log: (event) => {
              if (event.level === 'query') onQuery(event.query);
            },
          }),
    });
    return { file, db };
  };

  it('searches an index for every filter, never scans a table', async () => {
    const { file, db } = await migratedFile();
    try {
      const probes = probesOf(db, 'sqlite', {
        project: 'p',
        labels: { env: 'nowhere' },
        policy: 'quality',
        evaluator: 'nowhere',
        service: 'nowhere',
        source: 'nowhere',
      });
      probes.push(...probesOf(db, 'sqlite', { project: 'p', evaluator: 'nowhere' }));
      probes.push(...probesOf(db, 'sqlite', { project: 'p', outcome: 'OUTCOME_ERROR' }));
      probes.push(
        ...probesOf(db, 'sqlite', { project: 'p', outcome: 'OUTCOME_ERROR', policy: 'quality' }),
      );
      expect(probes).toHaveLength(7);
      for (const probe of probes) {
        const { sql, parameters } = probe.list.compile();
        const plan = file
          .prepare(`explain query plan ${sql}`)
          .all(...(parameters as unknown[])) as { detail: string }[];
        expect(plan.map((p) => p.detail).join('\n')).toMatch(
          /^SEARCH \w+ USING (COVERING INDEX|PRIMARY KEY)/,
        );
        expect(plan.some((p) => p.detail.startsWith('SCAN'))).toBe(false);
        // Read in the index's order: a count stops at LEAD_MAX + 1 entries.
        expect(plan.some((p) => p.detail.includes('TEMP B-TREE'))).toBe(false);
      }
    } finally {
      await db.destroy();
    }
  });

  it("checks one trace against a result filter by the primary key, not the filter's index", async () => {
    const { file, db } = await migratedFile();
    const planOf = (query: { compile(): { sql: string; parameters: readonly unknown[] } }) => {
      const { sql, parameters } = query.compile();
      return (
        file.prepare(`explain query plan ${sql}`).all(...(parameters as unknown[])) as {
          detail: string;
        }[]
      )
        .map((p) => p.detail)
        .join('\n');
    };
    try {
      // The lists' walk (every combination a list sends), and a probe's check in an intersection.
      for (const filter of [
        { policy: 'quality' },
        { evaluator: 'e' },
        { policy: 'quality', evaluator: 'e' },
        { outcome: 'OUTCOME_ERROR' },
        { outcome: 'OUTCOME_ERROR', policy: 'quality', evaluator: 'e' },
      ]) {
        const walk = db
          .selectFrom('traces')
          .select('trace_id')
          .where('project', '=', 'p')
          .where(resultsExist('sqlite', filter) as Expression<SqlBool>)
          .orderBy('start_ms', 'desc')
          .limit(50);
        expect(planOf(walk)).toMatch(
          /SEARCH results EXISTS USING (COVERING )?INDEX sqlite_autoindex_results_1 \(project=\? AND trace_id=\?/,
        );
        const [probe] = probesOf(db, 'sqlite', { project: 'p', ...filter });
        const check = db
          .selectFrom('traces')
          .select('trace_id')
          .where('project', '=', 'p')
          .where((probe as NonNullable<typeof probe>).has(sql.ref('traces.trace_id')));
        expect(planOf(check)).toMatch(
          /USING (COVERING )?INDEX sqlite_autoindex_results_1 \(project=\? AND trace_id=\?/,
        );
      }
    } finally {
      await db.destroy();
    }
  });

  it("checks one trace against a label by the label's key, with its start time", async () => {
    const { file, db } = await migratedFile();
    try {
      const [label] = probesOf(db, 'sqlite', { project: 'p', labels: { env: 'dev' } });
      const probe = label as NonNullable<typeof label>;
      const planOf = (start: boolean) => {
        const { sql: text, parameters } = db
          .selectFrom('trace_labels as d')
          .select('d.trace_id')
          .where(probe.has(sql.ref('d.trace_id'), start ? sql.ref('d.start_ms') : undefined))
          .compile();
        return (
          file.prepare(`explain query plan ${text}`).all(...(parameters as unknown[])) as {
            detail: string;
          }[]
        )
          .map((p) => p.detail)
          .join('\n');
      };
      const entry =
        /SEARCH o (EXISTS )?USING PRIMARY KEY \(project=\? AND key=\? AND value=\? AND start_ms=\? AND trace_id=\?\)/;
      // An intersection driven by another label has each trace's start time.
      expect(planOf(true)).toMatch(entry);
      // Else it is read from the trace's row, by key.
      expect(planOf(false)).toMatch(
        /SEARCH t USING INDEX sqlite_autoindex_traces_1 \(project=\? AND trace_id=\?\)/,
      );
      expect(planOf(false)).toMatch(entry);
    } finally {
      await db.destroy();
    }
  });

  it("reads a label's page of the traces list from its entries in that order, without sorting", async () => {
    const queries: { sql: string; parameters: readonly unknown[] }[] = [];
    const { file, db } = await migratedFile((query) => queries.push(query));
    const plans = () =>
      queries
        .filter((q) => q.sql.includes('"trace_labels" as "l"'))
        .map((q) =>
          (
            file.prepare(`explain query plan ${q.sql}`).all(...(q.parameters as unknown[])) as {
              detail: string;
            }[]
          )
            .map((p) => p.detail)
            .join('\n'),
        );
    try {
      await new KyselyTraceStore(db, 'sqlite').list(
        {
          project: 'p',
          labels: { env: 'dev' },
          name: 'n',
          since: '2026-01-01T00:00:00Z',
        },
        { pageSize: 50 },
      );
      await new KyselyResultStore(db, 'sqlite').list(
        { project: 'p', labels: { env: 'dev' }, since: T0 },
        { pageSize: 50 },
      );
      const [traces, scores] = plans();
      expect(traces).toMatch(
        /^SEARCH l USING PRIMARY KEY \(project=\? AND key=\? AND value=\? AND start_ms>\?\)\nSEARCH traces USING INDEX sqlite_autoindex_traces_1/,
      );
      expect(scores).toBeUndefined();
      expect(traces).not.toMatch(/TEMP B-TREE|SCAN/);
    } finally {
      await db.destroy();
    }
  });

  it('keeps the labels written before migrations 18 and 21, keyed in start order', async () => {
    const { file, db } = await migratedFile();
    try {
      // Back to migration 17's schema: migration 14's table and triggers, no order column.
      file.exec(`drop trigger trace_labels_order; drop trigger trace_labels_insert;
        drop trigger trace_labels_update; drop trigger trace_labels_delete;
        drop table trace_labels;
        create table trace_labels (project text not null, key text not null,
          value text not null, trace_id text not null,
          constraint trace_labels_pk primary key (project, key, value, trace_id)) without rowid;
        create trigger trace_labels_insert after insert on traces when new.labels <> '{}' begin
          insert or ignore into trace_labels (project, key, value, trace_id)
            select new.project, key, value, new.trace_id from json_each(new.labels); end;
        create trigger trace_labels_update after update of labels on traces
          when new.labels is not old.labels begin
          delete from trace_labels where (project, key, value, trace_id) in
            (select old.project, key, value, old.trace_id from json_each(old.labels));
          insert or ignore into trace_labels (project, key, value, trace_id)
            select new.project, key, value, new.trace_id from json_each(new.labels); end;
        create trigger trace_labels_delete after delete on traces when old.labels <> '{}' begin
          delete from trace_labels where (project, key, value, trace_id) in
            (select old.project, key, value, old.trace_id from json_each(old.labels)); end;
        insert into traces (project, trace_id, source, ingest_labels, first_seen_at, last_span_at,
          completed_at, start_ms, labels, digest, record, scored_at)
        values ('p', 'a', '', '{}', 1, 1, 2, 100, '{"env":"dev","tier":"x"}', 'd', '{}', 300),
          ('p', 'b', '', '{}', 1, 1, 2, 200, '{"env":"dev"}', 'd', '{}', null);
        insert into trace_labels (project, key, value, trace_id) values ('p', 'env', 'dev', 'gone');`);
      await labelOrder.up(db as unknown as Kysely<unknown>, 'sqlite');
      await labelKeys.up(db as unknown as Kysely<unknown>, 'sqlite');
      const entries = () =>
        file.prepare('select key, trace_id, start_ms from trace_labels order by 1, 2').all();
      // Each with its trace's start; the entry of a trace that no longer exists is not kept.
      expect(entries()).toEqual([
        { key: 'env', trace_id: 'a', start_ms: 100 },
        { key: 'env', trace_id: 'b', start_ms: 200 },
        { key: 'tier', trace_id: 'a', start_ms: 100 },
      ]);
      // And kept from then on: a start that moves, labels that change, a trace deleted.
      file.exec(`update traces set start_ms = 400 where trace_id = 'b';
        update traces set labels = '{"env":"prod"}', start_ms = 50 where trace_id = 'a'`);
      expect(entries()).toEqual([
        { key: 'env', trace_id: 'a', start_ms: 50 },
        { key: 'env', trace_id: 'b', start_ms: 400 },
      ]);
      file.exec(`delete from traces where trace_id = 'b'`);
      expect(entries()).toEqual([{ key: 'env', trace_id: 'a', start_ms: 50 }]);
      expect(
        file.prepare(`select sql from sqlite_master where name = 'trace_labels'`).get(),
      ).toMatchObject({
        sql: expect.stringContaining('primary key (project, key, value, start_ms, trace_id)'),
      });
    } finally {
      await db.destroy();
    }
  });

  it('lists the traces a results filter led without checking each against it again', async () => {
    const queries: { sql: string }[] = [];
    const { file, db } = await migratedFile((query) => queries.push(query));
    try {
      file.exec(`insert into traces (project, trace_id, source, ingest_labels, first_seen_at,
          last_span_at, completed_at, start_ms, labels, digest, record, scored_at)
        values ('p', 'a', '', '{}', 1, 1, 2, 100, '{}', 'd', '{}', 300),
          ('p', 'b', '', '{}', 1, 1, 2, 200, '{}', 'd', '{}', 300);
        insert into results (project, trace_id, policy, digest, evaluator, position, outcome,
          result, scored_at)
        values ('p', 'a', 'quality', 'd', 'e', 0, 'OUTCOME_ERROR', '{}', 300),
          ('p', 'b', 'quality', 'd', 'e', 0, 'OUTCOME_SCORED', '{}', 300);`);
      const traces = new KyselyTraceStore(db, 'sqlite');
      const page = await traces.list({ project: 'p', outcome: 'OUTCOME_ERROR' }, { pageSize: 50 });
      expect(page.items.map((t) => t.traceId)).toEqual(['a']);
      const scores = new KyselyResultStore(db, 'sqlite');
      const scored = await scores.list(
        { project: 'p', policy: 'quality', evaluator: 'e' },
        { pageSize: 50 },
      );
      expect(scored.items.map((t) => t.trace.traceId).sort()).toEqual(['a', 'b']);
      const lists = queries.filter((q) => /^select .* from "traces"/s.test(q.sql));
      expect(lists).toHaveLength(2);
      for (const list of lists) expect(list.sql).not.toContain('from results');
    } finally {
      await db.destroy();
    }
  });

  it('leads by a rare outcome, and by the few traces two common labels share', async () => {
    const { file, db } = await migratedFile();
    try {
      const row = (id: string, outcome: string) =>
        `('p', '${id}', 'quality', 'd', 'e', 0, '${outcome}', '{}', ${T0})`;
      file.exec(`insert into results (project, trace_id, policy, digest, evaluator, position,
        outcome, result, scored_at) values ${row('a', 'OUTCOME_ERROR')}, ${row('b', 'OUTCOME_SCORED')}`);
      expect(
        await leadingTraces(db, 'sqlite', { project: 'p', outcome: 'OUTCOME_SKIPPED' }),
      ).toEqual([]);
      expect(await leadingTraces(db, 'sqlite', { project: 'p', outcome: 'OUTCOME_ERROR' })).toEqual(
        ['a'],
      );
      expect(
        await leadingTraces(db, 'sqlite', {
          project: 'p',
          outcome: 'OUTCOME_ERROR',
          policy: 'other',
        }),
      ).toEqual([]);
      // More than LEAD_MAX traces each, one in common; then none in common.
      // Traces completed with the label added to those they have (the triggers write the entries).
      const labelled = (key: string, value: string, from: number, to: number) =>
        file.exec(`with recursive s(i) as (select ${from} union all select i + 1 from s where i < ${to})
          insert into traces (project, trace_id, source, ingest_labels, first_seen_at,
            last_span_at, completed_at, start_ms, labels, digest, record)
          select 'p', printf('%032x', i), '', '{}', 1, 1, 2, i,
            json_object('${key}', '${value}'), 'd', '{}' from s where true
          on conflict (project, trace_id) do update
            set labels = json_patch(traces.labels, excluded.labels)`);
      labelled('env', 'dev', 0, LEAD_MAX + 10);
      labelled('tier', 'trial', LEAD_MAX + 10, 2 * LEAD_MAX + 20);
      labelled('grade', 'gold', LEAD_MAX + 11, 2 * LEAD_MAX + 20);
      expect(
        await leadingTraces(db, 'sqlite', { project: 'p', labels: { env: 'dev', tier: 'trial' } }),
      ).toEqual([traceId(LEAD_MAX + 10)]);
      expect(
        await leadingTraces(db, 'sqlite', { project: 'p', labels: { env: 'dev', grade: 'gold' } }),
      ).toEqual([]);
      // Sharing more than LEAD_MAX: the walk.
      expect(
        await leadingTraces(db, 'sqlite', {
          project: 'p',
          labels: { tier: 'trial', 'tier-2': 'x' },
        }),
      ).toEqual([]);
      labelled('team', 'a', LEAD_MAX + 10, 2 * LEAD_MAX + 20);
      expect(
        await leadingTraces(db, 'sqlite', { project: 'p', labels: { tier: 'trial', team: 'a' } }),
      ).toBeUndefined();
      // Then the label matching fewest reads its entries in the list's order (the first of equals).
      expect(
        await planLead(db, 'sqlite', { project: 'p', labels: { tier: 'trial', team: 'a' } }),
      ).toEqual({
        label: ['tier', 'trial'],
      });
      // A label matching fewest leads so, ids of another filter when it matches fewer.
      expect(
        await planLead(db, 'sqlite', {
          project: 'p',
          labels: { env: 'dev' },
          outcome: 'OUTCOME_ERROR',
        }),
      ).toEqual({ ids: ['a'], resultsChecked: true });
      labelled('canary', 'true', 7, 7);
      expect(
        await planLead(db, 'sqlite', {
          project: 'p',
          labels: { canary: 'true' },
          outcome: 'OUTCOME_SCORED',
        }),
      ).toEqual({ label: ['canary', 'true'] });
      // Reads not in a list's order (aggregates) take a rare label's ids.
      expect(
        await leadingTraces(db, 'sqlite', { project: 'p', labels: { canary: 'true' } }),
      ).toEqual([traceId(7)]);
    } finally {
      await db.destroy();
    }
  });
});

const getTypeParser = ((oid: number, format?: 'text' | 'binary') =>
  oid === 20 && format !== 'binary'
    ? Number
    : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser;

describe.skipIf(PG_URL === undefined || PG_URL === '')(
  'the check of a results filter on PostgreSQL',
  () => {
    it('checks a filter matching more than LEAD_MAX traces hashed once, and lists the same pages', async () => {
      const schema = await freshPgSchema(PG_URL ?? '');
      const queries: CompiledQuery[] = [];
      const db = new Kysely<Tables>({
        dialect: new PostgresDialect({
          // bigint as numbers, as the store reads them (postgres/backend.ts).
          pool: new pg.Pool({ connectionString: schema.url, max: 2, types: { getTypeParser } }),
        }),
        log: (event) => {
          if (event.level === 'query') queries.push(event.query);
        },
      });
      try {
        const store = await openStore(
          { driver: 'postgres', url: schema.url, pool_size: 1 },
          { clock: new FakeClock(T0) },
        );
        await store.close();
        // 30,000 traces a second apart, newest first; every fourth has an error result
        // (7,500: more than LEAD_MAX, at most HASH_MAX), the others a scored one, and a result of
        // the policy `audit` too.
        const n = 30_000;
        expect(n / 4).toBeGreaterThan(LEAD_MAX);
        expect(n / 4).toBeLessThanOrEqual(HASH_MAX);
        await sql`insert into traces (project, trace_id, source, ingest_labels, first_seen_at,
            last_span_at, completed_at, start_ms, labels, digest, record, scored_at)
          select 'p', lpad(to_hex(i), 32, '0'), '', '{}', 1, 1, 2,${T0}::bigint - i * 1000, '{}', 'd', '{}',
            ${T0}::bigint - i * 1000 + 500
          from generate_series(0, ${n - 1}) as s(i)`.execute(db);
        await sql`insert into results (project, trace_id, policy, digest, evaluator, position,
            outcome, result, scored_at)
          select project, trace_id, 'quality', 'd', 'e', 0,
            case when ('x' || right(trace_id, 8))::bit(32)::int % 4 = 0 then 'OUTCOME_ERROR'
              else 'OUTCOME_SCORED' end, '{}', scored_at
          from traces`.execute(db);
        await sql`insert into results (project, trace_id, policy, digest, evaluator, position,
            outcome, result, scored_at)
          select project, trace_id, 'audit', 'd', 'e', 0, outcome, '{}', scored_at
          from results where outcome = 'OUTCOME_ERROR'`.execute(db);
        await sql`analyze`.execute(db);
        const errors = { project: 'p', policy: 'quality', outcome: 'OUTCOME_ERROR' as const };
        expect(await planLead(db, 'postgres', errors)).toEqual({ resultsHashed: true });
        // A common value: each trace walked is looked up by key (the walk is short).
        expect(await planLead(db, 'postgres', { project: 'p', outcome: 'OUTCOME_SCORED' })).toEqual(
          {},
        );
        const traces = new KyselyTraceStore(db, 'postgres');
        const want = (from: number) =>
          Array.from({ length: 50 }, (_, k) => traceId((from + k) * 4));
        queries.length = 0;
        const first = await traces.list(errors, { pageSize: 50 });
        expect(first.items.map((t) => t.traceId)).toEqual(want(0));
        const second = await traces.list(errors, {
          pageSize: 50,
          pageToken: first.nextPageToken ?? '',
        });
        expect(second.items.map((t) => t.traceId)).toEqual(want(50));
        const scores = new KyselyResultStore(db, 'postgres');
        // The scores list's results filter (policy and evaluator) is checked so too.
        expect(await planLead(db, 'postgres', { project: 'p', policy: 'audit' }, false)).toEqual({
          resultsHashed: true,
        });
        const audited = await scores.list({ project: 'p', policy: 'audit' }, { pageSize: 5 });
        expect(audited.items.map((t) => t.trace.traceId)).toEqual([0, 4, 8, 12, 16].map(traceId));
        const all = await scores.list({ project: 'p', policy: 'quality' }, { pageSize: 5 });
        expect(all.items.map((t) => t.trace.traceId)).toEqual([0, 1, 2, 3, 4].map(traceId));
        // The list reads the filter's traces once, hashed, not a result per trace.
        const list = queries.find((q) => /^select .* from "traces"/s.test(q.sql));
        expect(list?.sql).toContain('is true');
        const plan = await db.executeQuery<{ 'QUERY PLAN': string }>(
          CompiledQuery.raw(`explain ${list?.sql ?? ''}`, [...(list?.parameters ?? [])]),
        );
        const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(text).toContain('hashed SubPlan');
        expect(text).not.toMatch(/Sort Key/);
      } finally {
        await db.destroy();
        await schema.drop();
      }
    });
  },
);

describe.skipIf(PG_URL === undefined || PG_URL === '')(
  'trace_labels keyed in start order on PostgreSQL (migration 21)',
  () => {
    it('keeps the labels written before it, and keeps them as traces change', async () => {
      const schema = await freshPgSchema(PG_URL ?? '');
      const db = new Kysely<Tables>({
        dialect: new PostgresDialect({
          pool: new pg.Pool({ connectionString: schema.url, max: 1, types: { getTypeParser } }),
        }),
      });
      try {
        // The schema of migration 20, with labels written by its triggers, and an entry of a
        // trace that no longer exists.
        for (const m of MIGRATIONS.slice(0, labelKeys.version - 1)) {
          await m.up(db as unknown as Kysely<unknown>, 'postgres');
        }
        await sql`insert into traces (project, trace_id, source, ingest_labels, first_seen_at,
            last_span_at, completed_at, start_ms, labels, digest, record)
          values ('p', 'a', '', '{}', 1, 1, 2, 100, '{"env":"dev","tier":"x"}', 'd', '{}'),
            ('p', 'b', '', '{}', 1, 1, 2, 200, '{"env":"dev"}', 'd', '{}')`.execute(db);
        await sql`insert into trace_labels (project, key, value, trace_id, start_ms)
          values ('p', 'env', 'dev', 'gone', 5)`.execute(db);
        await labelKeys.up(db as unknown as Kysely<unknown>, 'postgres');
        const entries = async () =>
          (
            await sql<{ key: string; trace_id: string; start_ms: number }>`select key, trace_id,
              start_ms from trace_labels order by 1, 2`.execute(db)
          ).rows;
        expect(await entries()).toEqual([
          { key: 'env', trace_id: 'a', start_ms: 100 },
          { key: 'env', trace_id: 'b', start_ms: 200 },
          { key: 'tier', trace_id: 'a', start_ms: 100 },
        ]);
        await sql`update traces set start_ms = 400 where trace_id = 'b'`.execute(db);
        await sql`update traces set labels = '{"env":"prod"}', start_ms = 50
          where trace_id = 'a'`.execute(db);
        expect(await entries()).toEqual([
          { key: 'env', trace_id: 'a', start_ms: 50 },
          { key: 'env', trace_id: 'b', start_ms: 400 },
        ]);
        await sql`delete from traces where trace_id = 'b'`.execute(db);
        expect(await entries()).toEqual([{ key: 'env', trace_id: 'a', start_ms: 50 }]);
        const key = await sql<{ def: string }>`select pg_get_constraintdef(oid) as def
          from pg_constraint where conname = 'trace_labels_pk'
            and connamespace = current_schema()::regnamespace`.execute(db);
        expect(key.rows[0]?.def).toBe('PRIMARY KEY (project, key, value, start_ms, trace_id)');
      } finally {
        await db.destroy();
        await schema.drop();
      }
    });
  },
);
