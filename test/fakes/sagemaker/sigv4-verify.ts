import { createHash, createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * Signature Version 4 recomputed from AWS's published algorithm ("Create a signed AWS API
 * request", AWS General Reference), independently of the signer under test: what a SageMaker
 * front end checks before routing a request. Returns what is wrong, or undefined when the
 * signature holds.
 */

export interface SigV4Expectation {
  region: string;
  service: string;
  /** Secret (and session token, when it was issued with one) by access key id. */
  keys: Map<string, { secret: string; sessionToken?: string }>;
  /** Headers that must be signed (besides host, x-amz-date and x-amz-content-sha256). */
  mustSign: string[];
  /** The host the client addressed (a proxy in between may rewrite `Host`). */
  host: string;
  now: number;
}

const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
function uriEncode(s: string, keepSlash: boolean): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.~]/.test(c) || (keepSlash && c === '/')) out += c;
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function canonicalQuery(raw: string): string {
  if (raw === '') return '';
  const pairs = raw.split('&').map((p) => {
    const i = p.indexOf('=');
    const [k, v] = i < 0 ? [p, ''] : [p.slice(0, i), p.slice(i + 1)];
    // A `+` is a plus sign to SigV4, not a space.
    return [uriEncode(decodeURIComponent(k), false), uriEncode(decodeURIComponent(v), false)];
  });
  pairs.sort(([a = '', x = ''], [b = '', y = '']) =>
    a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0,
  );
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

function hmac(key: Buffer | string, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

export function verifySigV4(
  method: string,
  rawUrl: string,
  headers: IncomingHttpHeaders,
  body: Buffer,
  expect: SigV4Expectation,
): string | undefined {
  const m = AUTH.exec(headers.authorization ?? '');
  if (m === null) return 'no SigV4 Authorization header';
  const [, keyId = '', date = '', region, service, signedList = '', signature] = m;
  const key = expect.keys.get(keyId);
  if (key === undefined) return 'unknown access key';
  if (region !== expect.region) return `signed for region ${region}`;
  if (service !== expect.service) return `signed for service ${service}`;
  const amzDate = String(headers['x-amz-date'] ?? '');
  if (!amzDate.startsWith(date)) return 'x-amz-date does not match the credential scope';
  const signedAt = Date.parse(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  );
  if (!(Math.abs(expect.now - signedAt) < 15 * 60_000)) return 'signature date is skewed';
  const signed = signedList.split(';');
  for (const h of ['host', 'x-amz-date', 'x-amz-content-sha256', ...expect.mustSign]) {
    if (!signed.includes(h)) return `${h} is not signed`;
  }
  if (signed.includes('connection')) return 'Connection is signed (the service strips it)';
  if (key.sessionToken !== undefined) {
    if (!signed.includes('x-amz-security-token')) return 'the session token is not signed';
    if (headers['x-amz-security-token'] !== key.sessionToken) return 'wrong session token';
  }
  const payload = createHash('sha256').update(body).digest('hex');
  if (headers['x-amz-content-sha256'] !== payload)
    return 'x-amz-content-sha256 is not the body hash';
  const q = rawUrl.indexOf('?');
  const path = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const query = q < 0 ? '' : rawUrl.slice(q + 1);
  const value = (name: string) => {
    const v = name === 'host' ? expect.host : headers[name];
    return (Array.isArray(v) ? v.join(',') : String(v ?? '')).trim().replace(/\s+/g, ' ');
  };
  const canonical = [
    method,
    // Not S3: the path as received is encoded once more.
    uriEncode(path, true),
    canonicalQuery(query),
    signed.map((h) => `${h}:${value(h)}\n`).join(''),
    signedList,
    payload,
  ].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    createHash('sha256').update(canonical).digest('hex'),
  ].join('\n');
  const signingKey = hmac(
    hmac(hmac(hmac(`AWS4${key.secret}`, date), expect.region), expect.service),
    'aws4_request',
  );
  return createHmac('sha256', signingKey).update(toSign).digest('hex') === signature
    ? undefined
    : 'signature does not match';
}
