import { afterAll, expect } from 'vitest';
import { agentRun, sampleTrace } from '../../../../test/fakes/langfuse/samples.js';
import { LangfuseFake } from '../../../../test/fakes/langfuse/server.js';
import { connectorConformance } from '../../../../test/sources/conformance.js';
import { createHttpClient } from '../../../net/index.js';
import { createLangfuseConnector } from './connector.js';

/**
 * The connector conformance suite against the Langfuse contract fake (Langfuse cannot run here:
 * it needs ClickHouse). Seeded: six finished traces at four start times, three of them in the
 * same millisecond (more than the suite's page of two: Langfuse's cursor path), spread over
 * several listing windows.
 */

const T0 = Date.parse('2026-03-02T09:00:00.000Z');
const http = createHttpClient({ timeoutMs: 10_000 });
let fake: LangfuseFake | undefined;

afterAll(async () => {
  // Every request the connector sent was valid against Langfuse's published definitions.
  expect(fake?.violations).toEqual([]);
  await http.close();
  await fake?.close();
});

connectorConformance('Langfuse (contract fake, API v4.16.0)', async () => {
  fake = await LangfuseFake.start({
    publicKey: 'pk-lf-conformance-4d1e',
    secretKey: 'sk-lf-conformance-sentinel-9b3f27',
  });
  const starts = [T0, T0 + 1_000, T0 + 1_000, T0 + 1_000, T0 + 2 * 3_600_000, T0 + 3 * 86_400_000];
  const store = fake;
  store.add(...sampleTrace(T0 - 1));
  for (const [i, start] of starts.entries()) store.add(...agentRun(i + 1, start));
  const seeded = starts.map((startMs, i) => ({
    storeId: `${(i + 1).toString(16).padStart(8, '0')}${'ab'.repeat(12)}`,
    startMs,
  }));
  return {
    endpoint: store.url,
    credential: store.credential,
    connector: (endpoint, credential) =>
      createLangfuseConnector({ endpoint, http, credential: () => credential }),
    seeded: async () => seeded,
    // Read back with Langfuse's own scores API (v3), as a user would.
    readScores: async (storeId) => {
      const res = await fetch(
        `${store.url}/api/public/v3/scores?traceId=${encodeURIComponent(storeId)}&limit=100`,
        { headers: { authorization: `Basic ${Buffer.from(store.credential).toString('base64')}` } },
      );
      const body = (await res.json()) as { data: { name: string; value: unknown }[] };
      return body.data.map((s) => ({ name: s.name, value: s.value }));
    },
  };
});
