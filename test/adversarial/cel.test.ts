import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQLITE_FILE_NAME } from '../../src/store/sqlite/backend.js';
import { eventually } from '../support/process.js';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * Hostile CEL selectors on the real server: the ones whose cost is known to exceed the budget
 * are refused at apply; the rest, and the refused ones stored by an older build, run out of
 * their budget on a trace with a 120,000-character root span name and 4,000 tool calls. The
 * selectors run in the engine on the thread that answers HTTP, so `/healthz` must keep answering
 * while the trace is ingested, completed (in the completion worker) and evaluated.
 */

const X1000 = 'x'.repeat(1000);
const Y1000 = 'y'.repeat(1000);
const X500 = 'x'.repeat(500);

/** Known at apply to exceed the budget on a trace of the assumed sizes. */
const REFUSED = {
  quadratic: 'tools.exists(t, tools.filter(u, u == t).size() > 3)',
  exponential: `name.replace("", "${X1000}").replace("x", "${Y1000}") != ""`,
};

/** Fit the budget on a trace of the assumed sizes; over it on this trace. */
const ACCEPTED = {
  replace: 'name.replace("-", "_") != ""',
  growth: `name.replace("--", "${X500}") != ""`,
  'many-tools': `tools.exists(t, ${Array.from({ length: 12 }, (_, i) => `t == "refund-${i}"`).join(' || ')})`,
};

function resource(name: string, selector?: string) {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'OnlineEvalPolicy',
    metadata: { name, labels: { 'touchstone.dev/project': 'default' } },
    spec: {
      ...(selector === undefined ? {} : { selector }),
      stages: [{ evaluators: [{ ref: 'step-budget' }] }],
    },
  };
}

async function post(base: string, path: string, body: unknown) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  const json = (await res.json()) as { error?: { code: string; details: { message: string }[] } };
  return { status: res.status, error: json.error };
}

/** Spans per OTLP request (the OpenTelemetry SDKs' batch processor exports up to 512). */
const EXPORT_BATCH = 128;

interface OtlpTrace {
  traceId: string;
  bodies: string[];
}

/**
 * One trace as OTLP/JSON requests: `tools` tool calls, then their root span (which ends last)
 * with a name of `nameLength` dashes. Sent in small requests: how long ingest takes on a large
 * one is held to the budget by ingest's own tests; this one holds the selectors to it.
 */
function agentTrace(nameLength: number, tools: number): OtlpTrace {
  const traceId = randomBytes(16).toString('hex');
  const rootId = randomBytes(8).toString('hex');
  const now = BigInt(Date.now()) * 1_000_000n;
  const span = (spanId: string, name: string, parent: string, kind: string, tool?: string) => ({
    traceId,
    spanId,
    ...(parent === '' ? {} : { parentSpanId: parent }),
    name,
    kind: 1,
    startTimeUnixNano: String(now),
    endTimeUnixNano: String(now + 1_000_000n),
    attributes: [
      { key: 'gen_ai.operation.name', value: { stringValue: kind } },
      ...(tool === undefined ? [] : [{ key: 'gen_ai.tool.name', value: { stringValue: tool } }]),
    ],
  });
  const spans = [];
  for (let i = 0; i < tools; i++) {
    const tool = `tool-${i}`;
    spans.push(
      span(randomBytes(8).toString('hex'), `execute_tool ${tool}`, rootId, 'execute_tool', tool),
    );
  }
  spans.push(span(rootId, '-'.repeat(nameLength), '', 'invoke_agent'));
  const bodies: string[] = [];
  for (let i = 0; i < spans.length; i += EXPORT_BATCH) {
    const resource = { attributes: [{ key: 'service.name', value: { stringValue: 'hostile' } }] };
    const batch = spans.slice(i, i + EXPORT_BATCH);
    bodies.push(JSON.stringify({ resourceSpans: [{ resource, scopeSpans: [{ spans: batch }] }] }));
  }
  return { traceId, bodies };
}

/** Sends the trace; returns once the control policy scored it (every selector was evaluated). */
async function sendAndScore(base: string, { traceId, bodies }: OtlpTrace): Promise<void> {
  for (const body of bodies) {
    const res = await fetch(`${base}/v1/traces`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }
  await eventually(async () => {
    const res = await fetch(`${base}/v1alpha1/traces/${traceId}/scores`);
    if (res.status !== 200) return undefined;
    const json = (await res.json()) as { results: Record<string, unknown> };
    return json.results.control === undefined ? undefined : json;
  }, 60_000);
}

/** `touchstone_policy_expression_errors_total` by policy, for this reason. */
async function expressionErrors(base: string, reason: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^touchstone_policy_expression_errors_total\{(.*)\} (\d+)$/.exec(line);
    if (m === null || !m[1]?.includes(`reason="${reason}"`)) continue;
    const policy = /policy="([^"]*)"/.exec(m[1])?.[1] ?? '';
    out[policy] = (out[policy] ?? 0) + Number(m[2]);
  }
  return out;
}

describe('hostile CEL selectors', () => {
  let server: AdversarialServer;

  beforeAll(async () => {
    // Ingest cuts span names to 1 KiB by default; the cap is raised so the selectors meet the
    // 120,000-character name and the budget, not the cap, is what holds them.
    server = await startAdversarialServer(
      'traces:\n  completion_grace: 200ms\n  limits:\n    max_name_bytes: 262144\n',
    );
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('are refused at apply when their cost is known to exceed the budget', async () => {
    for (const [name, selector] of Object.entries(REFUSED)) {
      const { status, error } = await post(
        server.base,
        '/v1alpha1/policies',
        resource(name, selector),
      );
      expect(status, name).toBe(400);
      expect(error?.code).toBe('POLICY_CEL_INVALID');
      expect(error?.details[0]?.message).toMatch(/more than the budget of 200,000/);
    }
  });

  it('run out of their budget on a huge trace while /healthz keeps answering, and are counted', async () => {
    for (const [name, selector] of Object.entries(ACCEPTED)) {
      const { status } = await post(server.base, '/v1alpha1/policies', resource(name, selector));
      expect(status, name).toBe(200);
    }
    expect((await post(server.base, '/v1alpha1/policies', resource('control'))).status).toBe(200);
    // The refused ones as an older build would have stored them: they still load, and run under
    // the budget of every evaluation.
    const db = new Database(join(server.dataDir, SQLITE_FILE_NAME));
    try {
      const now = Date.now();
      const insert = db.prepare(
        'INSERT OR REPLACE INTO policies (project, name, resource, generation, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)',
      );
      for (const [name, selector] of Object.entries(REFUSED)) {
        insert.run('default', name, JSON.stringify(resource(name, selector)), now, now);
      }
    } finally {
      db.close();
    }
    // Let the engine load the stored policies (it re-reads them every second), then warm up:
    // a small trace through ingest, completion and every selector, so the budget measures the
    // hostile trace, not a cold process; and wait for the machine to be quiet enough to measure.
    await new Promise((r) => setTimeout(r, 1500));
    await sendAndScore(server.base, agentTrace(20, 50));
    for (let i = 0; i < 20; i++) {
      const idle = await probeWhile(server.base, () => new Promise((r) => setTimeout(r, 300)));
      if (idle.health.p99 < HEALTHZ_P99_BUDGET_MS) break;
    }
    const before = await expressionErrors(server.base, 'cost');

    const hostile = agentTrace(120_000, 4000);
    const { health } = await probeWhile(server.base, () => sendAndScore(server.base, hostile));
    expect(health.failures, describeHealth(health)).toBe(0);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);

    const scored = (await (
      await fetch(`${server.base}/v1alpha1/traces/${hostile.traceId}/scores`)
    ).json()) as { results: Record<string, unknown> };
    expect(Object.keys(scored.results)).toEqual(['control']);
    const after = await expressionErrors(server.base, 'cost');
    const counted = Object.fromEntries(
      Object.keys(after).map((policy) => [policy, (after[policy] ?? 0) - (before[policy] ?? 0)]),
    );
    expect(counted).toEqual({
      exponential: 1,
      growth: 1,
      'many-tools': 1,
      quadratic: 1,
      replace: 1,
    });
  }, 180_000);
});
