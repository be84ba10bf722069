/**
 * The tool-protocol server: `tools/call` of `get_trace` on a real `touchstone serve` process (from
 * source, SQLite in a temp dir, loopback HTTP; each call is one stateless POST to /mcp with a
 * fresh server for the caller, as in production), from the SDK's own client.
 *  1. a small agent trace (3 steps), BENCH_MCP_ROUNDS (500) calls one after another;
 *  2. the same, 8 clients at once (throughput and latency under concurrency);
 *  3. a 500-step trace with a 1 MB output: get_trace with the output and 100 steps, cut to the
 *     result budget (the bound's own cost);
 *  4. for comparison, REST `GET /v1alpha1/traces/{id}?view=basic` of the small trace, the read
 *     the tool makes, with the same HTTP client stack (fetch, keep-alive).
 * Budget: get_trace p95 ≤ 50 ms.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { bigTrace } from '../test/support/mcp.js';
import { agentTrace, jsonBody, recordSpans } from '../test/support/otel.js';
import { freePort, type ServerProcess, serveArgs, startServer } from '../test/support/process.js';
import { fmt, percentile } from './stats.js';

const ROUNDS = Number(process.env.BENCH_MCP_ROUNDS ?? 500);
const CONCURRENCY = 8;

async function send(base: string, build: Parameters<typeof recordSpans>[1], service: string) {
  const spans = recordSpans({ 'service.name': service }, build);
  const res = await fetch(`${base}/v1/traces`, {
    method: 'POST',
    body: jsonBody(spans),
    headers: { 'content-type': 'application/json' },
  });
  if (res.status !== 200) throw new Error(`OTLP export: HTTP ${res.status}`);
}

async function waitFor(base: string, traceId: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await fetch(`${base}/v1alpha1/traces/${traceId}?view=basic`)).status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the trace was never completed');
}

async function client(url: string): Promise<Client> {
  const c = new Client({ name: 'bench', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  return c;
}

async function timed(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await fn();
    out.push(performance.now() - started);
  }
  return out;
}

function line(label: string, ms: number[], extra = ''): void {
  console.log(
    `${label.padEnd(44)} p50 ${fmt(percentile(ms, 50), 2)} ms  p95 ${fmt(percentile(ms, 95), 2)} ms  p99 ${fmt(percentile(ms, 99), 2)} ms${extra}`,
  );
}

export async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-bench-mcp-'));
  let server: ServerProcess | undefined;
  try {
    const configFile = join(dir, 'config.yaml');
    writeFileSync(
      configFile,
      'traces:\n  completion_grace: 100ms\n  max_attribute_bytes: 2097152\n',
    );
    const port = await freePort();
    server = await startServer(serveArgs(join(dir, 'data'), port, configFile));
    const base = `http://127.0.0.1:${port}`;
    let small = '';
    let big = '';
    await send(
      base,
      (tracer) => {
        small = agentTrace(tracer, { fail: false });
      },
      'agent',
    );
    await send(
      base,
      (tracer) => {
        big = bigTrace(tracer, 500, 1_000_000);
      },
      'big',
    );
    await waitFor(base, small);
    await waitFor(base, big);
    console.log(
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (2 cores shared)`,
    );

    const url = `http://localhost:${port}/mcp`;
    const c = await client(url);
    const getSmall = () => c.callTool({ name: 'get_trace', arguments: { trace_id: small } });
    await timed(50, getSmall);
    line(`get_trace, sequential (${ROUNDS})`, await timed(ROUNDS, getSmall));

    const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => client(url)));
    const per = Math.ceil(ROUNDS / CONCURRENCY);
    const started = performance.now();
    const all = (
      await Promise.all(
        clients.map((k) =>
          timed(per, () => k.callTool({ name: 'get_trace', arguments: { trace_id: small } })),
        ),
      )
    ).flat();
    const rate = all.length / ((performance.now() - started) / 1000);
    line(
      `get_trace, ${CONCURRENCY} clients at once (${all.length})`,
      all,
      `  ${rate.toFixed(0)} calls/s`,
    );

    const getBig = () =>
      c.callTool({
        name: 'get_trace',
        arguments: { trace_id: big, include: ['output', 'trajectory'], step_limit: 100 },
      });
    await timed(5, getBig);
    line('get_trace, 500 steps + 1 MB output (50)', await timed(50, getBig));

    const rest = () =>
      fetch(`${base}/v1alpha1/traces/${small}?view=basic`).then((r) => r.arrayBuffer());
    await timed(50, rest);
    line(`REST GET /v1alpha1/traces/{id} (${ROUNDS})`, await timed(ROUNDS, rest));
    console.log('budget: get_trace p95 ≤ 50 ms');
    await Promise.all([c, ...clients].map((k) => k.close()));
  } finally {
    server?.proc.kill('SIGTERM');
    if (server !== undefined) await server.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}
