/**
 * Direct evaluation over HTTP: 10k records scored by 5 cheap evaluators.
 *  1. one record per request (4 in flight): server time per record from the Server-Timing header,
 *     p50/p95 (budget: p50 ≤ 2 ms);
 *  2. 100 records per request: records/s end to end.
 * The server runs in this process on SQLite in a temp dir, listening on 127.0.0.1.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createApp } from '../src/app/index.js';
import { loadConfig } from '../src/config/index.js';
import { fmt, percentile } from './stats.js';

const RECORDS = 10_000;
const EVALUATORS = [
  { ref: 'exact-match' },
  { ref: 'contains', params: { value: 'Paris' } },
  { ref: 'json-valid' },
  { ref: 'latency', params: { thresholdMs: 2000 } },
  { ref: 'tool-errors' },
];

function record(i: number) {
  return {
    id: `r${i}`,
    input: `What is the capital of France? (${i})`,
    output: i % 3 === 0 ? '{"answer": "Paris"}' : 'Paris is the capital of France.',
    reference: ['Paris', 'Paris is the capital of France.'],
    usage: { latencyMs: 500 + (i % 2000), inputTokens: 40, outputTokens: 12 },
    trajectory: [
      { type: 'llm', name: 'chat', model: 'gpt-4o-mini', output: 'calling search' },
      {
        type: 'tool',
        name: 'search',
        input: '{"q":"capital of France"}',
        output: 'Paris',
        error: i % 10 === 0 ? 'timeout' : '',
      },
      {
        type: 'llm',
        name: 'chat',
        model: 'gpt-4o-mini',
        output: 'Paris is the capital of France.',
      },
    ],
  };
}

async function post(url: string, body: string): Promise<{ serverMs: number; status: number }> {
  const res = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
  });
  await res.arrayBuffer();
  const timing = /dur=([\d.]+)/.exec(res.headers.get('server-timing') ?? '');
  return { serverMs: Number(timing?.[1] ?? Number.NaN), status: res.status };
}

export async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-'));
  const config = loadConfig({
    overrides: { data_dir: dataDir, listen: '127.0.0.1:0', log_level: 'silent' },
  });
  const app = await createApp(config, {
    env: {},
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
  const url = `http://${await app.listen()}/v1alpha1/evaluate`;
  try {
    // Warm-up (JIT, connection pool).
    for (let i = 0; i < 300; i++)
      await post(url, JSON.stringify({ records: [record(i)], evaluators: EVALUATORS }));

    const single: number[] = [];
    let next = 0;
    let failures = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < RECORDS) {
          const i = next++;
          const r = await post(
            url,
            JSON.stringify({ records: [record(i)], evaluators: EVALUATORS }),
          );
          if (r.status !== 200) failures++;
          single.push(r.serverMs);
        }
      }),
    );
    const singleSecs = (performance.now() - t0) / 1000;

    const batch = 100;
    const t1 = performance.now();
    for (let i = 0; i < RECORDS; i += batch) {
      const records = Array.from({ length: batch }, (_, j) => record(i + j));
      const r = await post(url, JSON.stringify({ records, evaluators: EVALUATORS }));
      if (r.status !== 200) failures++;
    }
    const batchSecs = (performance.now() - t1) / 1000;

    console.log(
      `records: ${RECORDS}, evaluators per record: ${EVALUATORS.length} (${EVALUATORS.map((e) => e.ref).join(', ')})`,
    );
    console.log(
      `one record per request, 4 in flight: server time per record p50 ${fmt(percentile(single, 50))} ms, p95 ${fmt(percentile(single, 95))} ms, p99 ${fmt(percentile(single, 99))} ms (budget p50 ≤ 2 ms); ${fmt(RECORDS / singleSecs, 0)} records/s`,
    );
    console.log(
      `100 records per request: ${fmt(RECORDS / batchSecs, 0)} records/s end to end (${fmt((batchSecs * 1000) / (RECORDS / batch), 1)} ms per request)`,
    );
    if (failures > 0) console.log(`FAILED requests: ${failures}`);
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
