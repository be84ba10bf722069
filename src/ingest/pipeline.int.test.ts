import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { FakeClock, type Span } from '../core/index.js';
import { compileRedaction } from '../redaction/index.js';
import { normalizeStoredTrace, PulledTraceWriter, type SpanLimits } from './index.js';
import { DEFAULT_SPAN_LIMITS } from './limits.js';

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
