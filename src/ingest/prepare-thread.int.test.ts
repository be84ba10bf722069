import { afterEach, describe, expect, it } from 'vitest';
import { agentTrace, jsonBody, protobufBody, recordSpans } from '../../test/support/otel.js';
import { eventually } from '../../test/support/process.js';
import { isError } from '../core/index.js';
import { compileRedaction } from '../redaction/index.js';
import { IngestErrors } from './error-codes.js';
import { DEFAULT_SPAN_LIMITS } from './limits.js';
import { normalizeStoredTrace } from './normalize-stored.js';
import { OtlpErrors } from './otlp/index.js';
import type { IngestResult, PrepareDeps } from './pipeline.js';
import {
  type PrepareRequest,
  PrepareThreads,
  prepareOtlp,
  receiveOtlpTraces,
} from './prepare-thread.js';

const SECRET = 'sk-live-0123456789abcdefghijklmnopqrstuv';
const redaction = { keys: [], patterns: ['ACME-[0-9]{8}'], pii: ['email' as const] };
const deps: PrepareDeps = {
  redactor: compileRedaction(redaction),
  limits: DEFAULT_SPAN_LIMITS,
  normalize: normalizeStoredTrace,
};

/** Two whole agent traces (one carrying a secret, a custom pattern and an e-mail) and a lone span. */
function spans() {
  return recordSpans({ 'service.name': 'travel', owner: 'ops@example.com' }, (tracer) => {
    agentTrace(tracer, { apiKey: SECRET, extra: { ticket: 'ACME-12345678' } });
    agentTrace(tracer, { fail: true });
    tracer.startSpan('orphan', {}, undefined).end();
  });
}

function request(body: Buffer | string): PrepareRequest {
  return {
    target: { project: 'p', labels: { team: 'search' }, source: '' },
    encoding: typeof body === 'string' ? 'json' : 'protobuf',
    body,
    options: { maxAttributeBytes: 65536, limits: DEFAULT_SPAN_LIMITS },
  };
}

function started(options: Partial<ConstructorParameters<typeof PrepareThreads>[0]> = {}) {
  const threads = new PrepareThreads({
    data: { redaction, limits: DEFAULT_SPAN_LIMITS, completeOnArrival: true },
    size: 1,
    ahead: 3,
    ...options,
  });
  threads.start();
  return threads;
}

describe('PrepareThreads', () => {
  let threads: PrepareThreads | undefined;
  afterEach(async () => {
    await threads?.shutdown();
    threads = undefined;
  });

  it('prepares a request in a worker exactly as the request thread does (both encodings)', async () => {
    threads = started();
    await eventually(async () => (threads?.running === 1 ? true : undefined), 30_000);
    const recorded = spans();
    for (const body of [protobufBody(recorded), jsonBody(recorded)]) {
      const inWorker = await threads.prepare(request(body));
      const here = await prepareOtlp(deps, request(body), async () => undefined);
      expect(inWorker).toEqual(here);
      // Redacted before it left the worker; whole traces completed, the lone span's left open.
      const text = JSON.stringify(inWorker);
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('ACME-12345678');
      expect(text).not.toContain('ops@example.com');
      expect(inWorker?.result.accepted).toBe(7);
      expect(inWorker?.traces).toBe(3);
      expect(inWorker?.encoded.traces.filter((t) => t.whole !== undefined)).toHaveLength(3);
    }
  });

  it('hands a decoding error back with its code and details', async () => {
    threads = started();
    await eventually(async () => (threads?.running === 1 ? true : undefined), 30_000);
    const err = await threads.prepare(request(Buffer.from([0x0a, 0xff, 0xff])))?.catch((e) => e);
    expect(isError(err, OtlpErrors.OTLP_DECODE_FAILED)).toBe(true);
    expect((err as { details: unknown[] }).details).toHaveLength(1);
  });

  it('answers a request whose worker died with a retryable error, and starts the worker again', async () => {
    // A worker of less heap than a body needs: as a hostile request would end a worker that
    // ran out of memory.
    threads = started({
      resourceLimits: { maxOldGenerationSizeMb: 96, maxYoungGenerationSizeMb: 16 },
    });
    await eventually(async () => (threads?.running === 1 ? true : undefined), 30_000);
    const huge = JSON.stringify({
      resourceSpans: [
        {
          resource: { attributes: [] },
          scopeSpans: Array.from({ length: 1000 }, (_, i) => ({
            scope: { name: `s${i}` },
            spans: Array.from({ length: 100 }, (_, j) => ({
              traceId: (i * 1000 + j + 1).toString(16).padStart(32, '0'),
              spanId: (j + 1).toString(16).padStart(16, '0'),
              name: 'x'.repeat(300),
              startTimeUnixNano: '1',
              endTimeUnixNano: '2',
            })),
          })),
        },
      ],
    });
    console.log('ready');
    const err = await threads.prepare(request(huge))?.catch((e) => e);
    console.log('err', err);
    expect(isError(err, IngestErrors.INGEST_WORKER_STOPPED)).toBe(true);
    expect((err as { retryable: boolean }).retryable).toBe(true);
    await eventually(async () => (threads?.running === 1 ? true : undefined), 30_000);
    const small = await threads.prepare(request(protobufBody(spans())));
    expect(small?.result.accepted).toBe(7);
  });

  it('prepares no more requests ahead of their store than it may hold', async () => {
    const running = started({ ahead: 1 });
    threads = running;
    await eventually(async () => (running.running === 1 ? true : undefined), 30_000);
    let sent = 0;
    const prepare = running.prepare.bind(running);
    running.prepare = (r) => {
      sent += 1;
      return prepare(r);
    };
    const stored: number[] = [];
    let storeFirst = () => {};
    const firstHeld = new Promise<void>((resolve) => {
      storeFirst = resolve;
    });
    const ingest = {
      preparing: deps,
      store: async (_target: unknown, prepared: { result: IngestResult }) => {
        stored.push(stored.length);
        return prepared.result;
      },
    } as unknown as Parameters<typeof receiveOtlpTraces>[0];
    const turn =
      (held: Promise<void> | undefined) =>
      async <T>(work: () => Promise<T>) => {
        await held;
        return work();
      };
    const body = protobufBody(spans());
    const first = receiveOtlpTraces(ingest, running, request(body), turn(firstHeld));
    const second = receiveOtlpTraces(ingest, running, request(body), turn(undefined));
    await eventually(async () => (sent === 1 ? true : undefined), 10_000);
    // The first is prepared and waits for its turn: the second waits with its body unread.
    await new Promise((r) => setTimeout(r, 200));
    expect([sent, stored.length]).toEqual([1, 0]);
    storeFirst();
    const results = await Promise.all([first, second]);
    expect(results.map((r) => r.accepted)).toEqual([7, 7]);
    expect([sent, stored.length]).toEqual([2, 2]);
  });

  it('leaves the request to its caller when no worker runs', async () => {
    threads = new PrepareThreads({
      data: { redaction, limits: DEFAULT_SPAN_LIMITS, completeOnArrival: true },
      size: 1,
      ahead: 3,
    });
    expect(threads.prepare(request(protobufBody(spans())))).toBeUndefined();
    threads.start();
    await threads.shutdown();
    expect(threads.prepare(request(protobufBody(spans())))).toBeUndefined();
  });
});
