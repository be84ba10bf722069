import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * One large OTLP resource shared by many small spans: every span of a resource belongs to it, so
 * a store that copies the resource into each span writes the resource once per span (a 330 KB
 * request of 1000 spans became over 300 MB on disk and held the thread answering requests for seconds). The
 * resource is stored once by content; stored bytes stay a small multiple of the request's,
 * whether its spans make one trace or hundreds.
 */

/**
 * Few enough spans that their own decoding and writing stay well within the budget on a loaded
 * machine; a store copying the resource into each would still write 80 MB.
 */
const SPANS = 400;
/** Most of the request: the resource, in attributes of 1000 bytes. */
const RESOURCE_BYTES = 200_000;

function body(traces: number, seed: number): string {
  const attributes = [{ key: 'service.name', value: { stringValue: `amplified-${seed}` } }];
  for (let i = 0; i * 1000 < RESOURCE_BYTES; i++) {
    attributes.push({ key: `host.tag.${i}`, value: { stringValue: 'r'.repeat(960) } });
  }
  const spans = Array.from({ length: SPANS }, (_, i) => ({
    traceId: `${seed.toString(16).padStart(8, '0')}${(1 + (i % traces)).toString(16).padStart(24, '0')}`,
    spanId: (i + 1).toString(16).padStart(16, '0'),
    name: 'small',
    kind: 1,
    startTimeUnixNano: '1763712000000000000',
    endTimeUnixNano: '1763712000500000000',
  }));
  return JSON.stringify({ resourceSpans: [{ resource: { attributes }, scopeSpans: [{ spans }] }] });
}

/** Characters of span and resource JSON stored so far. */
function storedChars(dataDir: string): number {
  const db = new Database(join(dataDir, 'touchstone.db'), { readonly: true });
  try {
    const sum = (sql: string) => Number((db.prepare(sql).get() as { n: number | null }).n ?? 0);
    return (
      sum('select sum(length(spans)) as n from span_chunks') +
      sum('select sum(length(spans)) as n from traces') +
      sum('select sum(length(attributes)) as n from span_resources')
    );
  } finally {
    db.close();
  }
}

async function post(base: string, payload: string): Promise<number> {
  const res = await fetch(`${base}/v1/traces`, {
    method: 'POST',
    body: payload,
    headers: { 'content-type': 'application/json' },
  });
  await res.arrayBuffer();
  return res.status;
}

describe('one large resource shared by many spans', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer('log_level: warn\n');
    // The first requests compile the ingest path; that is not what is measured.
    for (let i = 0; i < 3; i++) await post(server.base, body(10, 100 + i));
  });
  afterAll(() => server?.stop());

  it.each([
    ['in one trace', 1, 1],
    ['in a trace per span', SPANS, 2],
  ])('%s: stored once, and /healthz stays within budget', async (_, traces, seed) => {
    const payload = body(traces, seed);
    const before = storedChars(server.dataDir);
    const { result, health } = await probeWhile(server.base, () => post(server.base, payload));
    expect(result).toBe(200);
    expect(health.failures, describeHealth(health)).toBe(0);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    // The spans' own JSON and the resource once: about the request's size, never ×SPANS.
    const stored = storedChars(server.dataDir) - before;
    expect(stored).toBeGreaterThan(RESOURCE_BYTES);
    expect(stored).toBeLessThan(3 * payload.length);
  });
});
