import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * YAML built to exhaust the parser — alias and merge bombs ("billion laughs"), thousands of
 * anchors, deep nesting — sent to a real server: each is answered 400 (or 415 where a route takes
 * JSON only) at once, and `/healthz` stays within budget meanwhile.
 */

function laughs(levels: number): string {
  const lines = ['name: bomb', 'l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
  for (let i = 1; i <= levels; i++) lines.push(`l${i}: &l${i} [${Array(9).fill(`*l${i - 1}`)}]`);
  return lines.join('\n');
}

function mergeBomb(): string {
  const lines = ['%YAML 1.1', '---', 'name: merge', 'm0: &m0 {a: 1, b: 2, c: 3}'];
  for (let i = 1; i <= 40; i++) lines.push(`m${i}: &m${i}\n  <<: [*m${i - 1}, *m${i - 1}]`);
  return lines.join('\n');
}

function anchors(n: number): string {
  const keys = Array.from({ length: n }, (_, i) => `k${i}: &a${i} v`).join('\n');
  return `name: anchors\n${keys}\nz: [${Array.from({ length: n }, (_, i) => `*a${i}`).join(',')}]`;
}

const BOMBS: [string, string][] = [
  ['billion laughs', laughs(12)],
  ['a small exponential bomb (under the alias cap)', laughs(10)],
  ['a merge-key bomb', mergeBomb()],
  ['many anchors and aliases', anchors(1000)],
  ['deep flow nesting', `name: deep\nx: ${'['.repeat(5000)}${']'.repeat(5000)}`],
];

describe('YAML bombs over REST', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer();
    // The first requests of a fresh process compile their code paths, and its start-up work
    // (migrations, the completion worker) settles: neither is what is measured.
    for (const body of ['name: warm-up', laughs(3), laughs(12)]) {
      await fetch(`${server.base}/v1alpha1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    }
    for (let i = 0; i < 20; i++) {
      const idle = await probeWhile(server.base, () => new Promise((r) => setTimeout(r, 300)));
      if (idle.health.p99 < HEALTHZ_P99_BUDGET_MS) break;
    }
  });
  afterAll(async () => {
    await server?.stop();
  });

  it.each(BOMBS)('a run spec sent as text holding %s answers 400 at once', async (_name, yaml) => {
    const { result, health } = await probeWhile(server.base, async () => {
      const res = await fetch(`${server.base}/v1alpha1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(yaml),
      });
      const serverMs = Number(/app;dur=([\d.]+)/.exec(res.headers.get('server-timing') ?? '')?.[1]);
      return {
        status: res.status,
        serverMs,
        body: (await res.json()) as { error: { code: string } },
      };
    });
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe('RUN_SPEC_INVALID');
    // The server's own time on the request, with room for a loaded machine (unguarded, 20 000
    // anchors took 33 s).
    expect(result.serverMs).toBeLessThan(1000);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  });

  it.each(['policies', 'sources', 'webhooks'])(
    'a YAML body applied to /v1alpha1/%s answers 415 without being read',
    async (plural) => {
      for (const type of ['application/yaml', 'application/x-yaml', 'text/yaml']) {
        const res = await fetch(`${server.base}/v1alpha1/${plural}`, {
          method: 'POST',
          headers: { 'content-type': type },
          body: laughs(12),
        });
        expect(res.status).toBe(415);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
          'UNSUPPORTED_MEDIA_TYPE',
        );
      }
    },
  );
});
