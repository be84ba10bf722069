import { percentile } from '../stats.js';

/** What every server of the ingest comparison reports for one slice of the payload. */
export interface IngestFigures {
  /** Spans sent. */
  spans: number;
  /** Spans the server gave back when asked afterwards (its own read path). */
  stored: number;
  /** Seconds from the first request until every sent span was stored. */
  seconds: number;
  /** `stored / seconds`. */
  spansPerSecond: number;
  p95Ms: number;
  /** Requests turned away with 503/429 and sent again. */
  retries: number;
}

export interface SliceOptions {
  inFlight: number;
  /**
   * A body posted and stored before the clock starts, and not counted: a fresh server's first
   * request pays for its warm-up (lazy imports, JIT, first statements), which a short slice
   * would otherwise carry on one side only as much as that side's start-up costs.
   */
  warmUp?: Buffer;
}

export interface Posted {
  /** Seconds from the first request to the last acknowledgement. */
  seconds: number;
  latencies: number[];
  retries: number;
}

/**
 * Posts OTLP/HTTP protobuf bodies, `inFlight` at a time, as an exporter does: a 503 or 429 is
 * retried after a backoff (up to 100 times), anything else but 200 throws.
 */
export async function postBodies(
  url: string,
  bodies: readonly Buffer[],
  options: { inFlight: number; headers?: Record<string, string> },
): Promise<Posted> {
  const latencies: number[] = [];
  let next = 0;
  let retries = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.max(1, options.inFlight) }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++] as Buffer;
        for (let attempt = 0; ; attempt++) {
          const s = performance.now();
          const res = await fetch(url, {
            method: 'POST',
            body,
            headers: { 'content-type': 'application/x-protobuf', ...options.headers },
          });
          const text = Buffer.from(await res.arrayBuffer());
          latencies.push(performance.now() - s);
          if (res.status === 200) break;
          if ((res.status === 503 || res.status === 429) && attempt < 100) {
            retries++;
            await sleep(Math.min(1000, 20 * 2 ** Math.min(attempt, 6)));
            continue;
          }
          throw new Error(`${url} answered ${res.status}: ${text.toString('utf8', 0, 300)}`);
        }
      }
    }),
  );
  return { seconds: (performance.now() - t0) / 1000, latencies, retries };
}

/** Figures of a server that stores before it answers: the clock stops at the last answer. */
export function storedAtAnswer(posted: Posted, spans: number, stored: number): IngestFigures {
  return {
    spans,
    stored,
    seconds: posted.seconds,
    spansPerSecond: stored / posted.seconds,
    p95Ms: percentile(posted.latencies, 95),
    retries: posted.retries,
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
