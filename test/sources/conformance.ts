import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../../src/core/index.js';
import type { TraceStoreConnector, WriteBackItem } from '../../src/sources/index.js';
import { FaultProxy } from '../support/fault-proxy.js';

/**
 * The connector conformance suite: what every connector must do against its store, whatever the
 * store. Each connector runs it against a live server (or, where the store cannot run here, its
 * contract fake), reached through a FaultProxy so failures can be injected on demand.
 *
 * The backend adapter provides:
 * - `endpoint`: the store's base URL (the suite puts a FaultProxy in front of it);
 * - `connector(endpoint, credential)`: the connector under test, talking to `endpoint`;
 * - `credential`: a value the store accepts; the suite checks it never appears in an error;
 * - `seeded()`: at least five finished traces already in the store, with at least three distinct
 *   start times (the suite splits the window between two of them);
 * - `readScores(storeId)`: the scores the store holds on a trace, as (name, value) pairs, read
 *   with the store's own API, so a duplicate shows as two entries;
 * - `traceIds`: the form of the ids traces get in Touchstone, when not the OpenTelemetry trace id
 *   (32 lowercase hex); Databricks catalog schemas prefix it with `catalog.schema/`.
 */
export interface ConformanceBackend {
  endpoint: string;
  credential: string;
  connector(endpoint: string, credential: string): TraceStoreConnector;
  seeded(): Promise<{ storeId: string; startMs: number }[]>;
  readScores(storeId: string): Promise<{ name: string; value: unknown }[]>;
  traceIds?: RegExp;
}

function noSecret(err: unknown, secret: string): void {
  const text = [
    err instanceof Error ? err.message : String(err),
    JSON.stringify(err),
    isTouchstoneError(err) ? JSON.stringify(err.details) : '',
  ].join('\n');
  expect(text).not.toContain(secret);
}

/** Registers the suite in the calling test file (inside its own describe). */
export function connectorConformance(
  name: string,
  backend: () => Promise<ConformanceBackend>,
): void {
  describe(`${name}: connector conformance`, () => {
    let b: ConformanceBackend;
    let proxy: FaultProxy;
    let connector: TraceStoreConnector;
    let traces: { storeId: string; startMs: number }[];

    beforeAll(async () => {
      b = await backend();
      proxy = await FaultProxy.start(b.endpoint);
      connector = b.connector(proxy.url, b.credential);
      traces = (await b.seeded()).sort((x, y) => x.startMs - y.startMs);
      expect(traces.length).toBeGreaterThanOrEqual(5);
    });
    afterAll(async () => {
      await proxy?.close();
    });

    async function listAll(fromMs: number, toMs: number, pageSize: number): Promise<string[]> {
      const ids: string[] = [];
      let pageToken: string | undefined;
      for (let pages = 0; pages < 1000; pages++) {
        const page = await connector.list({
          fromMs,
          toMs,
          pageSize,
          ...(pageToken === undefined ? {} : { pageToken }),
        });
        for (const h of page.traces) {
          expect(h.startMs).toBeGreaterThanOrEqual(fromMs);
          expect(h.startMs).toBeLessThan(toMs);
          expect(h.traceId).toMatch(b.traceIds ?? /^[0-9a-f]{32}$/);
        }
        ids.push(...page.traces.map((h) => h.storeId));
        pageToken = page.nextPageToken;
        if (pageToken === undefined) return ids;
      }
      throw new Error('the listing never ended');
    }

    it('lists every trace once, in small pages and across a window boundary', async () => {
      const first = traces[0]?.startMs as number;
      const last = traces.at(-1)?.startMs as number;
      const wanted = traces.map((t) => t.storeId);
      const all = await listAll(first, last + 1, 2);
      expect(new Set(all).size).toBe(all.length);
      for (const id of wanted) expect(all).toContain(id);
      // Split at a start time: the boundary trace belongs to the second window only.
      const distinct = [...new Set(traces.map((t) => t.startMs))];
      const mid = distinct[Math.floor(distinct.length / 2)] as number;
      const left = await listAll(first, mid, 2);
      const right = await listAll(mid, last + 1, 2);
      expect(left.filter((id) => right.includes(id))).toEqual([]);
      for (const id of wanted) expect([...left, ...right]).toContain(id);
      expect(await listAll(last + 1, last + 2, 2)).toEqual([]);
    });

    it('fetches the spans of listed traces', async () => {
      const page = await connector.list({
        fromMs: traces[0]?.startMs as number,
        toMs: (traces.at(-1)?.startMs as number) + 1,
        pageSize: 5,
      });
      const fetched = await connector.fetch(page.traces);
      for (const h of page.traces) {
        const got = fetched.get(h.storeId);
        expect(got).toBeDefined();
        if (got !== undefined && 'spans' in got) {
          expect(got.spans.length).toBeGreaterThan(0);
          for (const s of got.spans) expect(s.traceId).toBe(h.traceId);
        }
      }
    });

    it('writes a score back as an idempotent upsert', async () => {
      const target = traces[0] as { storeId: string };
      const [header] = (
        await connector.list({
          fromMs: traces[0]?.startMs as number,
          toMs: (traces[0]?.startMs as number) + 1,
          pageSize: 10,
        })
      ).traces.filter((h) => h.storeId === target.storeId);
      expect(header).toBeDefined();
      const item = (value: number, remoteId?: string): WriteBackItem => ({
        storeId: target.storeId,
        traceId: header?.traceId as string,
        policy: 'conformance',
        metric: 'conformance-metric',
        score: {
          name: 'conformance-metric',
          value,
          explanation: 'written by the conformance suite',
        },
        judge: false,
        ...(remoteId === undefined ? {} : { remoteId }),
      });
      const [created] = await connector.writeBack([item(0.25)]);
      expect(created).toMatchObject({ remoteId: expect.any(String) });
      const remoteId = (created as { remoteId: string }).remoteId;
      // The same score again without the ledger's id: found and updated, not duplicated.
      const [again] = await connector.writeBack([item(0.5)]);
      expect(again).toMatchObject({ status: 'updated', remoteId });
      // With the id: updated in place.
      const [updated] = await connector.writeBack([item(0.75, remoteId)]);
      expect(updated).toMatchObject({ status: 'updated', remoteId });
      const scores = (await b.readScores(target.storeId)).filter(
        (s) => s.name === 'conformance-metric',
      );
      expect(scores).toHaveLength(1);
      expect(scores[0]?.value).toBe(0.75);
    });

    it('maps 401, 404, 429 (Retry-After) and 5xx to the right outcomes, with no credential in any error', async () => {
      const window = {
        fromMs: traces[0]?.startMs as number,
        toMs: (traces.at(-1)?.startMs as number) + 1,
        pageSize: 5,
      };
      const outcomes: [number, Record<string, string>, boolean, number?][] = [
        [401, {}, false],
        [404, {}, false],
        [429, { 'retry-after': '7' }, true, 7],
        [500, {}, true],
        [502, {}, true],
        [503, { 'retry-after': '3' }, true, 3],
      ];
      for (const [status, headers, retryable, retryAfter] of outcomes) {
        proxy.fault = {
          status,
          headers: { 'content-type': 'application/json', ...headers },
          body: '{"error":"injected"}',
        };
        const err = await connector.list(window).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isTouchstoneError(err), `HTTP ${status} must be a TouchstoneError`).toBe(true);
        if (isTouchstoneError(err)) {
          expect({ status, retryable: err.retryable }).toEqual({ status, retryable });
          if (retryAfter !== undefined) expect(err.retryAfterSeconds).toBe(retryAfter);
        }
        noSecret(err, b.credential);
        const [wb] = await connector.writeBack([
          {
            storeId: traces[0]?.storeId as string,
            traceId: '0'.repeat(31) + '1',
            policy: 'conformance',
            metric: 'conformance-metric',
            score: { name: 'conformance-metric', value: 1 },
            judge: false,
          },
        ]);
        expect(wb).toMatchObject({ status: 'failed', retryable });
        noSecret(wb, b.credential);
      }
      proxy.fault = undefined;
    });

    it('stops when the pull is aborted, within the budget', async () => {
      proxy.fault = { hang: true };
      const started = Date.now();
      const err = await connector
        .list({ fromMs: 0, toMs: Date.now(), pageSize: 5, signal: AbortSignal.timeout(300) })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      proxy.fault = undefined;
      expect(err).toBeDefined();
      expect(Date.now() - started).toBeLessThan(5_000);
      noSecret(err, b.credential);
    });
  });
}
