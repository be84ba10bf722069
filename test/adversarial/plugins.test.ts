import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answering, command, writeChain } from '../../src/plugins/wat.testkit.js';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * Hostile plug-in modules in a real server: one that never returns, one that writes 100 MB, one
 * that grows its memory without end, one that looks for files, environment and network. Each
 * ends as an error (or finds nothing), a healthy plug-in keeps scoring afterwards, and `/healthz`
 * stays within budget while they run.
 */

const OK = '{"scores":[{"name":"probe","passed":true}]}';
const NOT_OK = '{"scores":[{"name":"probe","passed":false}]}';
const bytesOf = (s: string) =>
  [...new TextEncoder().encode(s)].map((b) => `\\${b.toString(16).padStart(2, '0')}`).join('');

const dir = mkdtempSync(join(tmpdir(), 'touchstone-adversarial-plugins-'));
const chain = writeChain(dir, [
  {
    name: 'spin',
    module: command('(loop $l (br $l))'),
    evaluators: [{ name: 'hostile.spin', scores: [{ name: 'spin', kind: 'number' }] }],
    limits: { timeoutMs: 1000 },
  },
  {
    name: 'flood',
    // 1600 writes of 64 KiB: 100 MB.
    module: command(`(local $i i32)
      (loop $w
        (call $out (i32.const 0) (i32.const 65536))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $w (i32.lt_u (local.get $i) (i32.const 1600))))`),
    evaluators: [{ name: 'hostile.flood', scores: [{ name: 'flood', kind: 'number' }] }],
  },
  {
    name: 'hog',
    // Grows until refused, then traps (as a language runtime does when out of memory).
    module: command(`(block $done (loop $grow
        (br_if $done (i32.eq (memory.grow (i32.const 64)) (i32.const -1)))
        (br $grow)))
      (unreachable)`),
    evaluators: [{ name: 'hostile.hog', scores: [{ name: 'hog', kind: 'number' }] }],
  },
  {
    name: 'snoop',
    // Passes only when no directory, environment variable or socket is there to be had.
    module: command(
      `(i32.store (i32.const 300) (call $fd_prestat_get (i32.const 3) (i32.const 100)))
      (i32.store (i32.const 304) (call $path_open (i32.const 3) (i32.const 0) (i32.const 1024) (i32.const 11)
        (i32.const 0) (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 100)))
      (i32.store (i32.const 308) (call $sock_accept (i32.const 3) (i32.const 0) (i32.const 100)))
      (drop (call $environ_sizes_get (i32.const 312) (i32.const 316)))
      (if (i32.and
            (i32.and (i32.eq (i32.load (i32.const 300)) (i32.const 8)) (i32.eq (i32.load (i32.const 304)) (i32.const 76)))
            (i32.and (i32.eq (i32.load (i32.const 308)) (i32.const 52)) (i32.eqz (i32.load (i32.const 312)))))
        (then (call $out (i32.const 2048) (i32.const ${OK.length})))
        (else (call $out (i32.const 4096) (i32.const ${NOT_OK.length}))))`,
      `(data (i32.const 1024) "/etc/passwd")
       (data (i32.const 2048) "${bytesOf(OK)}")
       (data (i32.const 4096) "${bytesOf(NOT_OK)}")`,
    ),
    evaluators: [{ name: 'hostile.snoop', scores: [{ name: 'probe', kind: 'passed' }] }],
  },
  {
    name: 'fine',
    module: answering(OK),
    evaluators: [{ name: 'fine', scores: [{ name: 'probe', kind: 'passed' }] }],
  },
]);

describe('hostile plug-in modules in a real server', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer(
      `plugins:\n  index: ${JSON.stringify(chain.index)}\n  index_sha256: ${chain.sha256}\n  workers: 2\n`,
    );
    for (let i = 0; i < 3; i++) await evaluate('fine');
    for (let i = 0; i < 20; i++) {
      const idle = await probeWhile(server.base, () => new Promise((r) => setTimeout(r, 300)));
      if (idle.health.p99 < HEALTHZ_P99_BUDGET_MS) break;
    }
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function evaluate(ref: string) {
    const res = await fetch(`${server.base}/v1alpha1/evaluate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ records: [{ id: 'r', output: 'x' }], evaluators: [{ ref }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      results: {
        results: { outcome: string; reason?: string; scores: { passed?: boolean }[] }[];
      }[];
    };
    return body.results[0]?.results[0];
  }

  it.each([
    ['hostile.spin', 'exceeded its deadline of 1000 ms and was stopped'],
    ['hostile.flood', 'wrote more than 1048576 bytes to stdout'],
    ['hostile.hog', 'trapped: RuntimeError: unreachable'],
  ])('%s ends as an error, the server stays responsive and keeps scoring', async (ref, reason) => {
    const { result, health } = await probeWhile(server.base, () => evaluate(ref));
    expect(result).toMatchObject({ outcome: 'OUTCOME_ERROR', scores: [] });
    expect(result?.reason).toContain(reason);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    expect(await evaluate('fine')).toMatchObject({
      outcome: 'OUTCOME_SCORED',
      scores: [{ passed: true }],
    });
  });

  it('a module finds no file, environment variable or socket', async () => {
    expect(await evaluate('hostile.snoop')).toMatchObject({
      outcome: 'OUTCOME_SCORED',
      scores: [{ passed: true }],
    });
  });
});
