import { context, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { type Span, systemClock } from '../../src/core/index.js';
import { openStore } from '../../src/store/index.js';
import { protobufBody, recordSpans } from '../support/otel.js';

/**
 * Agent traces for the browser tests, made by the OpenTelemetry JS SDK with the GenAI semantic
 * conventions (messages as `gen_ai.input.messages` / `gen_ai.output.messages` JSON): an agent
 * asks a model, the model calls a tool, the tool answers or fails.
 */

export interface WeatherRun {
  question: string;
  city: string;
  /** The tool call fails with this message. */
  toolError?: string;
  /** Replaces the model's answer text (a hostile one, for XSS tests). */
  answer?: string;
  /** More tool arguments (a secret the server redacts). */
  extraArguments?: Record<string, unknown>;
}

export function weatherRun(tracer: Tracer, run: WeatherRun): string {
  let traceId = '';
  tracer.startActiveSpan(
    'invoke_agent weather',
    { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'weather' } },
    (root) => {
      traceId = root.spanContext().traceId;
      const parent = trace.setSpan(context.active(), root);
      const llm = tracer.startSpan(
        'chat gpt-4o-mini',
        {
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.request.model': 'gpt-4o-mini',
            'gen_ai.usage.input_tokens': 42,
            'gen_ai.usage.output_tokens': 17,
            'gen_ai.input.messages': JSON.stringify([
              {
                role: 'system',
                parts: [{ type: 'text', content: 'You are a weather assistant.' }],
              },
              { role: 'user', parts: [{ type: 'text', content: run.question }] },
            ]),
            'gen_ai.output.messages': JSON.stringify([
              {
                role: 'assistant',
                parts: [
                  ...(run.answer === undefined ? [] : [{ type: 'text', content: run.answer }]),
                  {
                    type: 'tool_call',
                    id: 'call_1',
                    name: 'get_weather',
                    arguments: { city: run.city },
                  },
                ],
                finish_reason: 'tool_call',
              },
            ]),
          },
        },
        parent,
      );
      llm.end();
      const tool = tracer.startSpan(
        'execute_tool get_weather',
        {
          attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': 'get_weather',
            'gen_ai.tool.call.id': 'call_1',
            'gen_ai.tool.call.arguments': JSON.stringify({
              city: run.city,
              unit: 'celsius',
              ...run.extraArguments,
            }),
            ...(run.toolError === undefined
              ? { 'gen_ai.tool.call.result': JSON.stringify({ temperature: 21, sky: 'sunny' }) }
              : {}),
          },
        },
        parent,
      );
      if (run.toolError !== undefined) {
        tool.recordException(new Error(run.toolError));
        tool.setStatus({ code: SpanStatusCode.ERROR, message: run.toolError });
      }
      tool.end();
      root.end();
    },
  );
  return traceId;
}

/** One trace of `steps` tool spans under one root (large traces). */
export function wideTrace(tracer: Tracer, steps: number): string {
  let traceId = '';
  tracer.startActiveSpan(
    'invoke_agent batch',
    { attributes: { 'gen_ai.operation.name': 'invoke_agent' } },
    (root) => {
      traceId = root.spanContext().traceId;
      const parent = trace.setSpan(context.active(), root);
      for (let i = 0; i < steps - 1; i++) {
        tracer
          .startSpan(
            `execute_tool lookup_${i}`,
            {
              attributes: {
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': `lookup_${i}`,
                'gen_ai.tool.call.arguments': `{"n":${i}}`,
              },
            },
            parent,
          )
          .end();
      }
      root.end();
    },
  );
  return traceId;
}

/** Sends spans over OTLP/HTTP protobuf with an ingest key; fails unless answered 200. */
export async function sendSpans(
  base: string,
  key: string | undefined,
  spans: ReadableSpan[],
): Promise<void> {
  const res = await fetch(`${base}/v1/traces`, {
    method: 'POST',
    body: protobufBody(spans),
    headers: {
      'content-type': 'application/x-protobuf',
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
    },
  });
  if (res.status !== 200) throw new Error(`OTLP export: HTTP ${res.status} ${await res.text()}`);
}

export { recordSpans };

/** A JSON API call with a key; returns the parsed body, failing on a status other than 200. */
export async function api<T = Record<string, unknown>>(
  base: string,
  key: string | undefined,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

/**
 * Stores a completed trace of `steps` tool steps straight into a data dir's SQLite store (before
 * the server starts): completing a 50,000-span trace from OTLP takes minutes on a loaded 2-core
 * machine, and what is tested here is how the UI reads it, not ingest.
 */
export async function seedWideTrace(
  dataDir: string,
  project: string,
  steps: number,
): Promise<string> {
  const store = await openStore({ driver: 'sqlite' }, { clock: systemClock, dataDir });
  const traceId = 'c0ffee'.padEnd(32, '7');
  const t0 = Date.now() - 60_000;
  const iso = (ms: number) => new Date(ms).toISOString();
  const root: Span = {
    traceId,
    spanId: '1'.repeat(16),
    parentSpanId: '',
    name: 'invoke_agent batch',
    kind: 1,
    startTimeUnixNano: `${t0}000000`,
    endTimeUnixNano: `${t0 + steps}000000`,
    attributes: {},
    events: [],
    links: [],
    status: { code: 0, message: '' },
    resource: { 'service.name': 'huge' },
    scope: { name: 'seed', version: '1' },
  };
  try {
    await store.traces.appendSpans(
      [{ project, traceId, spans: [root], labels: {}, source: '' }],
      t0,
    );
    const trajectory = Array.from({ length: steps }, (_, i) => ({
      type: i === 0 ? ('agent' as const) : ('tool' as const),
      name: i === 0 ? 'batch' : `lookup_${i}`,
      input: `{"n":${i}}`,
      start: iso(t0 + i),
      end: iso(t0 + i + 1),
      error: '',
      spanId: i.toString(16).padStart(16, '0'),
      ...(i === 0 ? {} : { parentSpanId: '0'.repeat(16) }),
    }));
    const done = await store.traces.complete(
      { project, traceId, lastSpanAt: t0, labels: {}, source: '' },
      {
        record: { id: traceId, trajectory },
        summary: {
          traceId,
          service: 'huge',
          name: 'invoke_agent batch',
          startTime: iso(t0),
          durationMs: steps,
          steps,
          error: false,
          labels: {},
        },
      },
      'seeded',
      t0,
    );
    if (!done.completed) throw new Error('the seeded trace did not complete');
  } finally {
    await store.close();
  }
  return traceId;
}
