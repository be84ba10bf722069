import type { FakeObservation } from './server.js';

/**
 * Traces to seed the fake with, shaped like what Langfuse serves: the generation recorded in the
 * reference notes (/work/shared/reference/stores/langfuse.md §4: ids, model, usage, cost, metadata,
 * trace context) inside a small agent run, a trace written by a pre-OpenTelemetry SDK (UUID ids
 * under Langfuse's synthetic `t-<trace id>` trace row, which has no end time), and plain
 * generated runs for paging.
 */

export const SAMPLE_TRACE_ID = '6a1f0c3e9b2d4f5a8c7e1d2b3a4f5e6d';
export const SAMPLE_ROOT_ID = 'a1b2c3d4e5f60718';
export const SAMPLE_GENERATION_ID = '0f1e2d3c4b5a6978';
export const SAMPLE_QUESTION = 'What is MLflow?';
export const SAMPLE_ANSWER =
  'MLflow is an open-source platform for the machine learning lifecycle.';

const iso = (ms: number) => new Date(ms).toISOString();

/** The reference sample's generation in an agent run: root agent, a tool call, the generation. */
export function sampleTrace(startMs = Date.parse('2025-06-15T14:07:40.000Z')): FakeObservation[] {
  const context = {
    traceId: SAMPLE_TRACE_ID,
    environment: 'default',
    userId: 'u1',
    sessionId: 's1',
    traceName: 'answer',
    tags: ['suite:fixtures'],
  };
  return [
    {
      ...context,
      id: SAMPLE_ROOT_ID,
      type: 'AGENT',
      name: 'answer',
      startTime: iso(startMs),
      endTime: iso(startMs + 3_000),
      parentObservationId: null,
      input: JSON.stringify({ args: [SAMPLE_QUESTION], kwargs: {} }),
      output: SAMPLE_ANSWER,
      metadata: { tenant: 'acme', 'touchstone.label.team': 'docs' },
    },
    {
      ...context,
      id: '5e6f7a8b9c0d1e2f',
      type: 'TOOL',
      name: 'search_docs',
      startTime: iso(startMs + 100),
      endTime: iso(startMs + 1_400),
      parentObservationId: SAMPLE_ROOT_ID,
      input: JSON.stringify({ args: [], kwargs: { query: 'MLflow' } }),
      output: JSON.stringify({ hits: 3 }),
    },
    {
      ...context,
      id: SAMPLE_GENERATION_ID,
      type: 'GENERATION',
      name: 'ChatCompletion',
      startTime: iso(startMs + 1_500),
      endTime: iso(startMs + 2_700),
      parentObservationId: SAMPLE_ROOT_ID,
      level: 'DEFAULT',
      statusMessage: null,
      input: JSON.stringify({ messages: [{ role: 'user', content: SAMPLE_QUESTION }] }),
      output: JSON.stringify({ role: 'assistant', content: SAMPLE_ANSWER }),
      metadata: { tenant: 'acme' },
      providedModelName: 'gpt-4o-mini',
      internalModelId: 'clx-gpt-4o-mini',
      modelParameters: { temperature: 0 },
      usageDetails: { input: 12, output: 40, total: 52 },
      costDetails: { input: 0.0000018, output: 0.000024, total: 0.0000258 },
      totalCost: 0.0000258,
    },
  ];
}

/**
 * A trace from the ingestion API (Langfuse SDKs before v3): a UUID trace id, Langfuse's
 * synthetic `t-<trace id>` trace row as its root (no end time, ever), UUID observation ids.
 */
export function legacyTrace(traceId: string, startMs: number): FakeObservation[] {
  return [
    {
      id: `t-${traceId}`,
      traceId,
      type: 'SPAN',
      name: 'legacy-run',
      startTime: iso(startMs),
      endTime: null,
      parentObservationId: null,
      input: 'hello',
      output: 'world',
      environment: 'default',
    },
    {
      id: '3f2b8c1e-7d4a-4e5b-9c6d-0a1b2c3d4e5f',
      traceId,
      type: 'GENERATION',
      name: 'llm',
      startTime: iso(startMs + 10),
      endTime: iso(startMs + 500),
      parentObservationId: `t-${traceId}`,
      providedModelName: 'gpt-4o-mini',
      input: 'hello',
      output: 'world',
      usageDetails: { input: 1, output: 1, total: 2 },
      environment: 'default',
    },
  ];
}

/** A small finished run: root agent span, one generation, one tool. */
export function agentRun(
  n: number,
  startMs: number,
  options: { environment?: string; error?: boolean; running?: boolean } = {},
): FakeObservation[] {
  const traceId = `${n.toString(16).padStart(8, '0')}${'ab'.repeat(12)}`;
  const root = `${n.toString(16).padStart(8, '0')}00000001`;
  const environment = options.environment ?? 'production';
  return [
    {
      id: root,
      traceId,
      type: 'AGENT',
      name: `run-${n}`,
      startTime: iso(startMs),
      endTime: options.running === true ? null : iso(startMs + 2_000),
      parentObservationId: null,
      input: `question ${n}`,
      output: options.running === true ? null : `answer ${n}`,
      environment,
      traceName: `run-${n}`,
    },
    {
      id: `${n.toString(16).padStart(8, '0')}00000002`,
      traceId,
      type: 'GENERATION',
      name: 'llm',
      startTime: iso(startMs + 10),
      endTime: iso(startMs + 900),
      parentObservationId: root,
      providedModelName: 'gpt-4o-mini',
      input: JSON.stringify([{ role: 'user', content: `question ${n}` }]),
      output: JSON.stringify({ role: 'assistant', content: `answer ${n}` }),
      usageDetails: { input: 10, output: 5, total: 15 },
      environment,
    },
    {
      id: `${n.toString(16).padStart(8, '0')}00000003`,
      traceId,
      type: 'TOOL',
      name: 'lookup',
      startTime: iso(startMs + 1_000),
      endTime: iso(startMs + 1_500),
      parentObservationId: root,
      input: JSON.stringify({ id: n }),
      output: options.error === true ? null : JSON.stringify({ ok: true }),
      level: options.error === true ? 'ERROR' : 'DEFAULT',
      statusMessage: options.error === true ? 'lookup failed: timeout' : null,
      environment,
    },
  ];
}
