/**
 * Overload: more OTLP exporters than the server can store for, each sending batches back to back
 * and retrying 503s after Retry-After. The server must shed (503 + Retry-After) instead of
 * queueing, answer every request within 10 s, keep answering reads and health checks, and keep
 * every span it acknowledged. Bounds are loose for a loaded 2-core CI machine: under saturation
 * the event loop runs one request's decode-and-store between two polls of the sockets, and a
 * 510-span batch takes hundreds of milliseconds there, so health checks get 2 s here rather than
 * the harness's 100 ms. The load runs in a child process, so the probes and reads timed here are
 * not delayed by it. bench/overload.ts runs the long version (200 connections, 60 s) and prints
 * the figures.
 */
import { connect as connectHttp2 } from 'node:http2';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { percentile } from '../../bench/stats.js';
import {
  ingestLoadInChild,
  lostSpans,
  readWhile,
  sampleRss,
  serverFigures,
} from '../support/ingest-load.js';
import {
  type AdversarialServer,
  describeHealth,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

const CONNECTIONS = 80;
const DURATION_MS = 10_000;

describe('overload', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer('log_level: warn\n');
  });
  afterAll(() => server?.stop());

  it('sheds with 503 + Retry-After, answers every request and read in time, loses nothing acknowledged', async () => {
    const rss = sampleRss(server.server.proc.pid as number);
    const { result, health } = await probeWhile(server.base, async () => {
      const load = ingestLoadInChild({
        base: server.base,
        connections: CONNECTIONS,
        durationMs: DURATION_MS,
        tracesPerBatch: 170,
      });
      const reads = readWhile(
        server.base,
        ['/v1alpha1/traces?page_size=50', '/v1alpha1/scores?page_size=50'],
        load,
      );
      return { ingest: await load, reads: await reads };
    });
    const peakRss = rss.stop();
    const { ingest, reads } = result;
    const figures =
      `answers ${JSON.stringify(ingest.statuses)}, request p99 ${percentile(ingest.latencies, 99).toFixed(0)} ms, ` +
      `longest ${Math.max(...ingest.latencies).toFixed(0)} ms; reads p99 ${percentile(reads.latencies, 99).toFixed(0)} ms ` +
      `(${reads.latencies.length}); ${describeHealth(health)}; peak RSS ${peakRss.toFixed(0)} MB; ` +
      `server ${JSON.stringify(await serverFigures(server.base))}`;

    // Shed, not queued: refusals came, each saying when to retry, and work still got done.
    expect(ingest.statuses['503'] ?? 0, figures).toBeGreaterThan(0);
    expect(ingest.withoutRetryAfter, figures).toBe(0);
    expect(Object.keys(ingest.statuses).sort(), figures).toEqual(['200', '503']);
    expect(ingest.acknowledgedSpans, figures).toBeGreaterThan(0);
    // No request waits more than 10 s; reads and health checks keep answering.
    expect(Math.max(...ingest.latencies), figures).toBeLessThan(10_000);
    expect(reads.failures, figures).toBe(0);
    expect(percentile(reads.latencies, 99), figures).toBeLessThan(3_000);
    expect(health.failures, figures).toBe(0);
    expect(health.p99, figures).toBeLessThan(2_000);
    // Memory bounded by configuration and by the heap limits `serve` sets itself (src/main.ts):
    // without them Node 24's larger young generation and V8's 4× old-generation headroom put the
    // peak at 400–500 MB here; with them it is about 300–330 MB on this 2-core machine type.
    expect(peakRss, figures).toBeLessThan(400);
    // Nothing acknowledged is lost.
    expect(lostSpans(server.dataDir, ingest.acknowledged), figures).toBe(0);
  }, 180_000);
});

describe('a client trickling a write body', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer(
      'log_level: warn\nlimits:\n  max_inflight_write_requests: 1\n  request_timeout: 2s\n  max_connections: 8\n',
    );
  });
  afterAll(() => server?.stop());

  it('is cut off with 408 after limits.request_timeout, and the place it held is freed', async () => {
    const port = Number(new URL(server.base).port);
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      answer += chunk;
    });
    const closed = new Promise<number>((resolve) =>
      socket.on('close', () => resolve(performance.now())),
    );
    socket.write(
      'POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n',
    );
    const trickle = setInterval(() => socket.write('\n'), 500);
    const started = performance.now();
    try {
      await new Promise((r) => setTimeout(r, 500));
      const post = () =>
        fetch(`${server.base}/v1/traces`, {
          method: 'POST',
          body: '{"resourceSpans":[]}',
          headers: { 'content-type': 'application/json' },
        });
      expect((await post()).status).toBe(503);
      const end = await closed;
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      // 2 s, checked every 5 s, with room for a loaded machine.
      expect(end - started).toBeLessThan(15_000);
      // The server frees the place when the cut connection's close callback runs, in the same
      // turn of its event loop as the cut but after its sockets are polled: a request the client
      // sends the moment it sees the close can still find the place held, so ask a few times.
      let status = (await post()).status;
      for (let tries = 0; status === 503 && tries < 20; tries++) {
        await new Promise((r) => setTimeout(r, 50));
        status = (await post()).status;
      }
      expect(status).toBe(200);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  }, 60_000);

  it('over HTTP/2 has its stream reset after limits.request_timeout, and the place it held is freed', async () => {
    const session = connectHttp2(server.base);
    session.on('error', () => undefined);
    const post = () =>
      fetch(`${server.base}/v1/traces`, {
        method: 'POST',
        body: '{"resourceSpans":[]}',
        headers: { 'content-type': 'application/json' },
      });
    try {
      // The earlier test's place may still be held for a moment (see there).
      let status = (await post()).status;
      for (let tries = 0; status === 503 && tries < 20; tries++) {
        await new Promise((r) => setTimeout(r, 50));
        status = (await post()).status;
      }
      expect(status).toBe(200);
      const stream = session.request({
        ':method': 'POST',
        ':path': '/v1/traces',
        'content-type': 'application/x-protobuf',
        'content-length': '1000',
      });
      stream.on('error', () => undefined);
      const reset = new Promise<{ code: number; at: number }>((resolve) =>
        stream.on('close', () => resolve({ code: stream.rstCode, at: performance.now() })),
      );
      const trickle = setInterval(() => stream.write('\n'), 500);
      const started = performance.now();
      try {
        await new Promise((r) => setTimeout(r, 500));
        expect((await post()).status).toBe(503);
        const { code, at } = await reset;
        expect(code).toBe(8); // CANCEL
        expect(at - started).toBeGreaterThan(1_500);
        expect(at - started).toBeLessThan(15_000);
      } finally {
        clearInterval(trickle);
      }
      status = (await post()).status;
      for (let tries = 0; status === 503 && tries < 20; tries++) {
        await new Promise((r) => setTimeout(r, 50));
        status = (await post()).status;
      }
      expect(status).toBe(200);
    } finally {
      session.destroy();
    }
  }, 60_000);

  it('holds limits.max_connections: idle connections past it are closed at once, the server still answers', async () => {
    const port = Number(new URL(server.base).port);
    const sockets = Array.from({ length: 12 }, () => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      return {
        socket,
        closed: new Promise<boolean>((resolve) => socket.once('close', () => resolve(true))),
      };
    });
    try {
      // Four of the twelve (or more, were some other connection still open) are closed unserved.
      const closedSoon = await Promise.all(
        sockets.map((s) =>
          Promise.race([s.closed, new Promise<boolean>((r) => setTimeout(() => r(false), 2_000))]),
        ),
      );
      expect(closedSoon.filter(Boolean).length).toBeGreaterThanOrEqual(4);
    } finally {
      for (const s of sockets) s.socket.destroy();
    }
    let answered = false;
    for (let tries = 0; !answered && tries < 20; tries++) {
      answered = await fetch(`${server.base}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (!answered) await new Promise((r) => setTimeout(r, 100));
    }
    expect(answered).toBe(true);
  }, 60_000);
});
