/**
 * Shared harness of the adversarial suite: a real `touchstone serve` process (so a blocked event
 * loop cannot also block the test that measures it) and a prober that times `GET /healthz` while a
 * hostile request runs.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kill9, launchServer, type RunningServer } from '../support/process.js';

/** The budget every adversarial input is held to: `/healthz` p99 while it runs. */
export const HEALTHZ_P99_BUDGET_MS = 100;

export interface AdversarialServer extends RunningServer {
  dataDir: string;
  stop(): Promise<void>;
}

/** Starts a server on a fresh data dir with this YAML config (no auth on loopback by default). */
export async function startAdversarialServer(configYaml = ''): Promise<AdversarialServer> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-adversarial-'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, configYaml);
  const dataDir = join(dir, 'data');
  const running = await launchServer(dataDir, configFile);
  return {
    ...running,
    dataDir,
    async stop() {
      await kill9(running);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Responsiveness {
  /** Latencies of every probe, in ms, sorted ascending. */
  samples: number[];
  p99: number;
  max: number;
  /** Probes that failed or answered other than 200 (a probe that times out counts as failed). */
  failures: number;
}

/**
 * Runs `work` while probing `GET /healthz` every `intervalMs` (one probe at a time; a probe that
 * does not answer within `timeoutMs` is recorded at `timeoutMs` and counted as failed). Probing
 * starts before the work and keeps going for `settleMs` after it ends, so a stall the work leaves
 * behind (a background loop chewing on its input) is measured too.
 */
export async function probeWhile<T>(
  base: string,
  work: () => Promise<T>,
  opts: { intervalMs?: number; timeoutMs?: number; settleMs?: number } = {},
): Promise<{ result: T; health: Responsiveness }> {
  const intervalMs = opts.intervalMs ?? 10;
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const settleMs = opts.settleMs ?? 500;
  const samples: number[] = [];
  let failures = 0;
  let stopped = false;
  const prober = (async () => {
    while (!stopped) {
      const started = performance.now();
      try {
        const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
        await res.arrayBuffer();
        if (res.status !== 200) failures++;
        samples.push(performance.now() - started);
      } catch {
        failures++;
        samples.push(Math.max(performance.now() - started, timeoutMs));
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  // Let a few probes land before the work starts, so a work that blocks at once still has a
  // probe waiting on it.
  await new Promise((r) => setTimeout(r, 3 * intervalMs));
  let result: T;
  try {
    result = await work();
    await new Promise((r) => setTimeout(r, settleMs));
  } finally {
    stopped = true;
    await prober;
  }
  samples.sort((a, b) => a - b);
  const p99 = samples[Math.min(samples.length - 1, Math.floor(samples.length * 0.99))] ?? 0;
  return {
    result,
    health: { samples, p99, max: samples[samples.length - 1] ?? 0, failures },
  };
}

/** One line for an assertion message: the figures, never the input. */
export function describeHealth(h: Responsiveness): string {
  return `healthz p99 ${h.p99.toFixed(1)} ms, max ${h.max.toFixed(1)} ms, ${h.samples.length} probes, ${h.failures} failed`;
}

/**
 * POSTs a body the server may refuse before reading it (413 on its Content-Length): the answer is
 * taken when it comes, and the write error of the rest of the body that the server then no longer
 * reads (EPIPE, ECONNRESET) is expected, not a failure — unlike `fetch`, which throws it away with
 * the answer.
 */
export function postUnread(
  url: string,
  body: Uint8Array | string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    req.end(body);
  });
}
