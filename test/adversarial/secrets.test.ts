import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * Text built to make each secret detector's scanner work hardest (anchors back to back, openings
 * that never close, long runs of key material), 1 MiB per request through OTLP/JSON in values of
 * the default size cap, while `/healthz` is probed: scans are linear and a request's spans are
 * redacted in slices, so the server keeps answering within its budget. The same size of plain
 * prose is the control: when it fails too, the host is too busy for the budget, whatever the
 * detectors do.
 */

const MIB = 1 << 20;
/** The default `traces.max_attribute_bytes`: a longer value would be cut before redaction. */
const ATTRIBUTE_BYTES = 64 * 1024;

function repeat(unit: string, bytes: number): string {
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

/** Pseudo-random base64 (a long run of key material, no newline). */
function base64Run(bytes: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  let seed = 11;
  const out: string[] = [];
  for (let i = 0; i < bytes; i++) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    out.push(alphabet[seed % 64]!);
  }
  return out.join('');
}

/** Each detector's worst case: the unit repeated, or the whole text. */
const HOSTILE: [string, (bytes: number) => string][] = [
  ['control: plain prose', (n) => repeat('The flight to Paris leaves at seven. ', n)],
  ['http-auth: "Bearer " back to back', (n) => repeat('Bearer ', n)],
  ['http-auth: Bearer tokens back to back', (n) => repeat('Bearer a.b ', n)],
  ['http-auth: "Basic " and user:password base64', (n) => repeat('Basic dXNlcjpwYXNz ', n)],
  ['http-auth: Authorization headers on one line', (n) => repeat('Authorization: "x ', n)],
  ['http-auth: curl -u on one line', (n) => `curl ${repeat('-u a:b ', n)}`],
  ['password: pairs back to back', (n) => repeat('password=a&', n)],
  ['password: keys without values', (n) => repeat('password= ', n)],
  ['password: "=" only', (n) => repeat('=', n)],
  ['password: YAML lines', (n) => repeat('\n  password: x', n)],
  ['url-userinfo: schemes back to back', (n) => repeat('a://b:c@', n)],
  ['url-query: credential parameters', (n) => repeat('&sig=a', n)],
  ['private-key: BEGIN lines without END', (n) => repeat('-----BEGIN RSA PRIVATE KEY-----\n', n)],
  ['private-key: "-----BEGIN" only', (n) => repeat('-----BEGIN', n)],
  ['jwt: headers back to back', (n) => repeat('eyJhbGciOiJub25lIn0.', n)],
  ['aws: key material runs', base64Run],
  ['aws: secret keys without values', (n) => repeat('aws_secret_access_key=', n)],
  ['vendor prefixes glued together', (n) => repeat('ghp_sk-glpat-xoxb-AKIA', n)],
  ['sk- back to back', (n) => repeat('sk-', n)],
];

/** An OTLP/JSON request whose spans carry `text` in string attributes and status messages. */
function body(text: string): string {
  const spans = [];
  for (let i = 0, at = 0; at < text.length; i++, at += ATTRIBUTE_BYTES) {
    const value = text.slice(at, at + ATTRIBUTE_BYTES);
    spans.push({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: (i + 1).toString(16).padStart(16, '0'),
      name: 'hostile',
      kind: 1,
      startTimeUnixNano: '1763712000000000000',
      endTimeUnixNano: '1763712000500000000',
      attributes: [{ key: 'input.value', value: { stringValue: value } }],
      status: { code: 2, message: value.slice(0, 4096) },
    });
  }
  return JSON.stringify({
    resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ spans }] }],
  });
}

describe('secret detectors on hostile text', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer();
    // The first requests compile the ingest path and every detector; that is not what is measured.
    const sample = HOSTILE.map(([, make]) => make(4096)).join('\n');
    for (let i = 0; i < 3; i++) {
      const warm = await fetch(`${server.base}/v1/traces`, {
        method: 'POST',
        body: body(sample),
        headers: { 'content-type': 'application/json' },
      });
      await warm.arrayBuffer();
    }
  });
  afterAll(() => server?.stop());

  it.each(HOSTILE)('%s (1 MiB): /healthz stays within budget', async (_, make) => {
    const payload = body(make(MIB));
    const { result, health } = await probeWhile(server.base, async () => {
      const res = await fetch(`${server.base}/v1/traces`, {
        method: 'POST',
        body: payload,
        headers: { 'content-type': 'application/json' },
      });
      await res.arrayBuffer();
      return res.status;
    });
    expect(result).toBe(200);
    expect(health.failures, describeHealth(health)).toBe(0);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  });
});
