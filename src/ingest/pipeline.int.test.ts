import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { type StoreTarget, storeVariants, variantTarget } from '../../test/support/stores.js';
import { FakeClock, type Span } from '../core/index.js';
import { compileRedaction } from '../redaction/index.js';
import type { Store } from '../store/index.js';
import {
  IngestService,
  normalizeStoredTrace,
  PulledTraceWriter,
  type SpanLimits,
  TraceCompleter,
} from './index.js';
import { DEFAULT_SPAN_LIMITS } from './limits.js';
import { MAX_WHOLE_SPANS } from './pipeline.js';

/** The ingest limits on the pulled-trace door (connectors build spans without the decoders). */
describe('PulledTraceWriter', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
  });
  afterAll(() => t.close());

  const writerWith = (limits: SpanLimits | undefined) =>
    new PulledTraceWriter({
      store: t.app.store,
      redactor: compileRedaction({}),
      clock: new FakeClock(Date.parse('2026-01-01T00:00:00Z')),
      normalize: normalizeStoredTrace,
      ...(limits === undefined ? {} : { limits }),
    });
  const pulled = (spans: Span[]) => ({
    project: 'default',
    traceId: spans[0]!.traceId,
    source: 'prod-mlflow',
    labels: {},
    spans,
  });
  const root = (traceId: string, fields: Partial<Span>): Span => ({
    traceId,
    spanId: 'eee19b7ec3c1b174',
    parentSpanId: '',
    name: 'agent',
    kind: 1,
    startTimeUnixNano: '1767225600000000000',
    endTimeUnixNano: '1767225601000000000',
    attributes: {},
    events: [],
    links: [],
    status: { code: 0, message: '' },
    resource: { 'service.name': 'svc' },
    scope: { name: '', version: '' },
    ...fields,
  });

  it('applies the default limits: names and keys cut, attributes past 128 dropped and counted', async () => {
    const writer = writerWith(undefined);
    const attributes: Record<string, number> = { 'openinference.span.kind': 0 };
    for (let i = 0; i < 1000; i++) attributes[`k${i}`] = i;
    const traceId = '5b8efff798038103d269b633813fc60c';
    const span = root(traceId, {
      name: 'N'.repeat(1 << 20),
      attributes: {
        'openinference.span.kind': 'AGENT',
        [`${'K'.repeat(1 << 20)}`]: 1,
        ...attributes,
      },
    });
    expect(await writer.write(pulled([span]))).toBe(true);
    const [stored] = await t.app.store.traces.spans('default', traceId);
    expect(stored!.name).toBe(`${'N'.repeat(1024)}…[truncated ${(1 << 20) - 1024} bytes]`);
    expect(Object.keys(stored!.attributes)).toHaveLength(128);
    expect(Object.keys(stored!.attributes)[1]!.startsWith(`${'K'.repeat(1024)}…[truncated`)).toBe(
      true,
    );
    expect(stored!.droppedAttributesCount).toBe(1002 - 128);
    const found = await t.app.store.traces.get('default', traceId);
    expect(found?.record.metadata?.dropped).toEqual({ attributes: 1002 - 128 });
  });

  it('applies configured limits', async () => {
    const writer = writerWith({
      ...DEFAULT_SPAN_LIMITS,
      maxAttributesPerSpan: 1,
      maxEventsPerSpan: 0,
    });
    const traceId = '6b8efff798038103d269b633813fc60c';
    const event = { name: 'e', timeUnixNano: '1767225600500000000', attributes: {} };
    await writer.write(pulled([root(traceId, { attributes: { a: 1, b: 2 }, events: [event] })]));
    const [stored] = await t.app.store.traces.spans('default', traceId);
    expect(stored).toMatchObject({
      attributes: { a: 1 },
      events: [],
      droppedAttributesCount: 1,
      droppedEventsCount: 1,
    });
  });
});

/** Whole traces complete in the request that brings them; other traces wait for the completer. */
describe.each(storeVariants().map((v) => [v.name, v] as const))(
  'IngestService completing whole traces on arrival (%s)',
  (_name, variant) => {
    const T0 = Date.parse('2026-01-01T00:00:00Z');
    const rules = { graceMs: 2000, idleMs: 30_000, maxAgeMs: 300_000 };
    let target: StoreTarget;
    let store: Store;
    let clock: FakeClock;
    let ingest: IngestService;
    let completer: TraceCompleter;
    let completed: number[];
    beforeEach(async () => {
      target = await variantTarget(variant, 'touchstone-whole-');
      clock = new FakeClock(T0);
      store = await target.open(clock);
      completed = [];
      const observer = {
        onReceived: () => undefined,
        onRejected: () => undefined,
        onStored: () => undefined,
        onCompleted: (n: number) => completed.push(n),
      };
      ingest = new IngestService({
        store,
        redactor: compileRedaction({}),
        clock,
        normalize: normalizeStoredTrace,
        observer,
      });
      completer = new TraceCompleter({ store, clock, rules, normalize: normalizeStoredTrace });
      await store.policies.upsert('p', 'cheap', { spec: {} }, T0);
    });
    afterEach(async () => {
      await store.close();
      await target.cleanup();
    });

    const span = (traceId: string, n: number, parent: number | undefined): Span => ({
      traceId,
      spanId: n.toString(16).padStart(16, '0'),
      parentSpanId: parent === undefined ? '' : parent.toString(16).padStart(16, '0'),
      name: parent === undefined ? 'invoke_agent weather' : `execute_tool t${n}`,
      kind: 1,
      startTimeUnixNano: `${T0 + n}000000`,
      endTimeUnixNano: `${T0 + 100 - n}000000`,
      attributes:
        parent === undefined
          ? { 'gen_ai.operation.name': 'invoke_agent' }
          : { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': `t${n}` },
      events: [],
      links: [],
      status: { code: 0, message: '' },
      resource: { 'service.name': 'svc' },
      scope: { name: 's', version: '1' },
    });
    /** A root (span 1) and `n - 1` descendants, each child of the one before it or of the root. */
    const trace = (traceId: string, n: number): Span[] =>
      Array.from({ length: n }, (_, i) =>
        span(traceId, i + 1, i === 0 ? undefined : i % 2 === 0 ? i : 1),
      );
    const send = (spans: Span[]) =>
      ingest.ingest(
        { project: 'p', labels: { env: 'prod' }, source: '' },
        { spans, rejected: 0, rejectReasons: [] },
      );
    const queued = async () => {
      const items = await store.work.claim(clock.now(), 100, clock.now() + 60_000, 'test');
      for (const item of items) await store.work.complete(item.id, 'test');
      return items.map((i) => [i.traceId, i.digest, i.traceCompletedAt]);
    };
    const id = (n: number) => n.toString(16).padStart(32, '0');

    it('stores a one-span trace and a 12-span trace complete, with their work items, in the request', async () => {
      await send([...trace(id(1), 1), ...trace(id(2), 12)]);
      expect(completed).toEqual([2]);
      expect(await store.traces.countOpen()).toBe(0);
      const one = await store.traces.get('p', id(1));
      const twelve = await store.traces.get('p', id(2));
      expect(one?.trace).toMatchObject({
        name: 'invoke_agent weather',
        steps: 1,
        labels: { env: 'prod' },
      });
      expect(twelve?.trace).toMatchObject({ name: 'invoke_agent weather', steps: 12 });
      expect(twelve?.record.trajectory).toHaveLength(12);
      expect((await queued()).sort()).toEqual([
        [id(1), one?.trace.digest, T0],
        [id(2), twelve?.trace.digest, T0],
      ]);
      // Nothing left for the completer, ever.
      clock.advance(rules.maxAgeMs);
      expect(await completer.tick()).toBe(0);
    });

    it('completes the same record and digest the completer computes from the stored spans', async () => {
      await send(trace(id(3), 12));
      const arrived = await store.traces.get('p', id(3));
      // The same batch again (an exporter's retry) re-opens it; the completer completes it from the
      // stored chunks: equal digest, so no second work item.
      await queued();
      clock.advance(10);
      await send(trace(id(3), 12));
      expect(await store.traces.get('p', id(3))).toBeUndefined();
      clock.advance(rules.graceMs);
      expect(await completer.tick()).toBe(1);
      const again = await store.traces.get('p', id(3));
      expect(again?.record).toEqual(arrived?.record);
      expect(again?.trace.digest).toBe(arrived?.trace.digest);
      expect(await queued()).toEqual([]);
    });

    it('leaves a partial batch open: a missing parent, no root, two roots', async () => {
      const missing = trace(id(4), 12).filter((s) => s.spanId !== span(id(4), 2, 1).spanId);
      const rootless = trace(id(5), 3).slice(1);
      const twoRoots = [...trace(id(6), 2), span(id(6), 9, undefined)];
      await send([...missing, ...rootless, ...twoRoots]);
      expect(completed).toEqual([]);
      expect(await store.traces.countOpen()).toBe(3);
      expect(await queued()).toEqual([]);
      clock.advance(rules.graceMs);
      expect(await completer.tick()).toBe(2);
      clock.advance(rules.idleMs);
      expect(await completer.tick()).toBe(1);
    });

    it('leaves a whole trace of more than MAX_WHOLE_SPANS spans to the completer', async () => {
      await send([...trace(id(10), MAX_WHOLE_SPANS + 1), ...trace(id(11), MAX_WHOLE_SPANS)]);
      expect(completed).toEqual([1]);
      expect(await store.traces.get('p', id(10))).toBeUndefined();
      expect((await store.traces.get('p', id(11)))?.trace.steps).toBe(MAX_WHOLE_SPANS);
      clock.advance(rules.graceMs);
      expect(await completer.tick()).toBe(1);
      expect((await store.traces.get('p', id(10)))?.trace.steps).toBe(MAX_WHOLE_SPANS + 1);
    });

    it('re-opens a trace that has spans already; the completer completes the union, and a late span makes a new version', async () => {
      const all = trace(id(7), 4);
      await send(all.slice(1));
      // The root and its subtree arrive whole, but the trace has stored spans: not completed here.
      await send(all.slice(0, 1));
      expect(completed).toEqual([]);
      expect(await store.traces.get('p', id(7))).toBeUndefined();
      clock.advance(rules.graceMs);
      expect(await completer.tick()).toBe(1);
      const union = await store.traces.get('p', id(7));
      expect(union?.trace.steps).toBe(4);
      const [first] = await queued();
      expect(first?.[1]).toBe(union?.trace.digest);

      // A late span of a trace completed on arrival re-opens it; its new version is queued.
      await send(trace(id(8), 1));
      const early = await store.traces.get('p', id(8));
      await queued();
      await send([span(id(8), 2, 1)]);
      expect(await store.traces.get('p', id(8))).toBeUndefined();
      clock.advance(rules.graceMs);
      expect(await completer.tick()).toBe(1);
      const late = await store.traces.get('p', id(8));
      expect(late?.trace.steps).toBe(2);
      expect(late?.trace.digest).not.toBe(early?.trace.digest);
      expect((await queued()).map((q) => q[1])).toEqual([late?.trace.digest]);
    });

    it('queues no work item in a project without a policy, and completes all the same', async () => {
      await ingest.ingest(
        { project: 'q', labels: {}, source: '' },
        { spans: trace(id(9), 3), rejected: 0, rejectReasons: [] },
      );
      expect((await store.traces.get('q', id(9)))?.trace.steps).toBe(3);
      expect(await queued()).toEqual([]);
    });
  },
);
