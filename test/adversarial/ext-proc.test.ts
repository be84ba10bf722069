/**
 * Hostile gateway streams against the Envoy external processor of a real server process: streams
 * that announce a body and never send it, streams that send nothing, a 10 MB body, a body nested
 * 100k deep, a batch of 1,000 calls, and bytes that are not a ProcessingRequest. Each gets a
 * bounded, clear refusal that echoes nothing, while `/healthz` stays within the harness budget
 * and the processor keeps answering. The hostile client runs in a child process, so the probes
 * timed here do not wait on it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOSTILE_SECRET, runHostileInChild } from '../support/ext-proc-hostile.js';
import { freePort } from '../support/process.js';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

const BODY_TIMEOUT_MS = 1_000;

describe('hostile ext_proc streams', () => {
  let server: AdversarialServer;
  let address: string;
  beforeAll(async () => {
    address = `127.0.0.1:${await freePort()}`;
    server = await startAdversarialServer(
      `log_level: warn\nguardrails:\n  ext_proc:\n    listen: ${address}\n    body_timeout: ${BODY_TIMEOUT_MS}ms\n`,
    );
    // One ordinary exchange first: the processor's first stream compiles its code paths, which
    // is start-up, not the hostile input's doing.
    await runHostileInChild({ kind: 'garbage', address });
  });
  afterAll(() => server?.stop());

  it('streams that never send the body, or nothing at all, each get a bounded 408', async () => {
    const { result, health } = await probeWhile(server.base, () =>
      runHostileInChild({ kind: 'stalls', address, withHeaders: 50, silent: 10 }),
    );
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    const { withHeaders = [], silent = [] } = result;
    expect(withHeaders).toHaveLength(50);
    expect(silent).toHaveLength(10);
    for (const r of [...withHeaders, ...silent]) {
      expect(r.status).toBe(408);
      expect(r.ms).toBeLessThan(BODY_TIMEOUT_MS + 5_000);
    }
    expect(JSON.parse(withHeaders[0]?.text ?? '').error.message).toBe(
      `the gateway sent no request body within ${BODY_TIMEOUT_MS} ms`,
    );
    expect(JSON.parse(silent[0]?.text ?? '').error.message).toBe(
      `the gateway sent no message within ${BODY_TIMEOUT_MS} ms`,
    );
  });

  it('a 10 MB body, deep nesting and a batch of 1,000 calls are refused without echo', async () => {
    const { result, health } = await probeWhile(server.base, () =>
      runHostileInChild({ kind: 'bodies', address }),
    );
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    const expected = {
      huge: [413, 'the request body is larger than 2097152 bytes'],
      deep: [400, 'the body nests deeper than 64 levels'],
      batch: [400, 'a batch holds at most 100 messages'],
    } as const;
    for (const [name, [status, message]] of Object.entries(expected)) {
      const [out] = result[name] ?? [];
      expect(out?.status, name).toBe(status);
      expect(JSON.parse(out?.text ?? '').error.message, name).toBe(message);
      expect(out?.text).not.toContain(HOSTILE_SECRET);
    }
  });

  it('bytes that are not a ProcessingRequest end that stream with a gRPC error; the next passes', async () => {
    const { result, health } = await probeWhile(server.base, () =>
      runHostileInChild({ kind: 'garbage', address }),
    );
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    const [garbage] = result.garbage ?? [];
    expect(garbage?.text).toMatch(/^(?!0 )\d+ /);
    const [after] = result.after ?? [];
    expect(after?.status).toBeUndefined();
  });
});
