import { describe, expect, it } from 'vitest';
import { scoresOf } from './evaluate.testkit.js';
import { ibanValid, luhnValid, piiLeak, secretLeak } from './leaks.js';

const pii = async (output: unknown, params: object = {}) =>
  (await scoresOf(piiLeak, params, { output }))['pii-leak'];
const secret = async (output: unknown, params: object = {}) =>
  (await scoresOf(secretLeak, params, { output }))['secret-leak'];
const countsOf = (s: { metadata?: Record<string, unknown> } | undefined) => s?.metadata?.counts;

describe('checksums', () => {
  it('Luhn', () => {
    expect(luhnValid('4111111111111111')).toBe(true);
    expect(luhnValid('4111111111111112')).toBe(false);
    expect(luhnValid('378282246310005')).toBe(true);
  });

  it('IBAN mod 97', () => {
    expect(ibanValid('DE89370400440532013000')).toBe(true);
    expect(ibanValid('GB82 WEST 1234 5698 7654 32')).toBe(true);
    expect(ibanValid('DE89370400440532013001')).toBe(false);
    expect(ibanValid('DE89')).toBe(false);
  });
});

describe('pii-leak', () => {
  it('passes clean text', async () => {
    expect(
      await pii('The meeting is at 10:30 on 2024-05-01; version 1.2.3; order 123456789.'),
    ).toMatchObject({
      passed: true,
      explanation: 'no PII found',
      metadata: { counts: {} },
    });
  });

  it.each([
    ['email', 'write to jane.doe+eval@example.co.uk today'],
    ['phone', 'call (555) 123-4567'],
    ['phone', 'call 555-123-4567'],
    ['phone', 'call +44 20 7946 0958'],
    ['phone', 'call +1 (555) 123-4567 now'],
    ['phone', 'call +4222222222222'],
    ['credit-card', 'card 4222222222222'],
    ['credit-card', 'card 4111 1111 1111 1111 exp 12/30'],
    ['credit-card', 'card 5555-5555-5555-4444'],
    ['credit-card', 'amex 378282246310005'],
    ['us-ssn', 'ssn 123-45-6789'],
    ['ipv4', 'host 192.168.1.20 is up'],
    ['iban', 'IBAN DE89 3704 0044 0532 0130 00'],
    ['iban', 'IBAN GB82WEST12345698765432'],
  ])('finds %s', async (type, text) => {
    const s = await pii(text);
    expect(s?.passed).toBe(false);
    expect(countsOf(s)).toEqual({ [type]: 1 });
  });

  it.each([
    ['a Luhn-invalid card', 'card 4111 1111 1111 1112'],
    ['a millisecond timestamp', 'at 1735689600000 ms'],
    ['an invalid SSN area', 'ssn 000-12-3456 and 666-12-3456 and 900-12-3456'],
    ['an out-of-range IP', 'addr 999.1.1.1'],
    ['a dotted version', 'release 1.2.3.4.5'],
    ['a bare digit run', 'ticket 5551234567'],
    ['an IBAN with a bad checksum', 'DE89370400440532013001'],
    ['an at sign without a domain', 'meet @ noon, user@localhost'],
  ])('ignores %s', async (_, text) => {
    expect((await pii(text))?.passed).toBe(true);
  });

  it('counts each value once and reports kinds and counts, never values', async () => {
    const text =
      'Mail a@x.io or b@y.io, card 4111-1111-1111-1111, ssn 123-45-6789, call +1 555 123 4567.';
    const s = await pii(text);
    expect(countsOf(s)).toEqual({ email: 2, 'credit-card': 1, 'us-ssn': 1, phone: 1 });
    expect(s?.explanation).toBe('found PII: email: 2, credit-card: 1, us-ssn: 1, phone: 1');
    const serialized = JSON.stringify(s);
    for (const value of ['a@x.io', '4111', '123-45-6789', '555'])
      expect(serialized).not.toContain(value);
  });

  it('checks only the requested types', async () => {
    const text = 'a@x.io 192.168.0.1';
    expect(countsOf(await pii(text, { types: ['ipv4'] }))).toEqual({ ipv4: 1 });
    expect(countsOf(await pii(text, { types: 'email' }))).toEqual({ email: 1 });
    expect(
      piiLeak.manifest.params.safeParse({ types: ['passport'] }).error?.issues[0]?.path,
    ).toEqual(['types', 0]);
  });

  it('scans the answer of a transcript and structured output', async () => {
    expect((await pii([{ role: 'assistant', content: 'x@y.org' }]))?.passed).toBe(false);
    expect((await pii({ contact: 'x@y.org' }))?.passed).toBe(false);
  });

  it('stays linear on a large output', async () => {
    const big = `${'1.2.3.4 a@b.cd 555-123-4567 '.repeat(20_000)}`;
    const started = performance.now();
    const s = await pii(big);
    expect(countsOf(s)).toEqual({ email: 20_000, ipv4: 20_000, phone: 20_000 });
    expect(performance.now() - started).toBeLessThan(3000);
  });
});

// Built at run time so no credential-shaped literal sits in the source for scanners to flag.
const token = (prefix: string, body: string, n: number) =>
  `${prefix}${body.repeat(Math.ceil(n / body.length)).slice(0, n)}`;
const JWT = `${token('eyJ', 'hbGciOiJIUzI1NiJ9', 17)}.${token('eyJ', 'zdWIiOiIxMjM0In0', 16)}.${token('', 'Sfl5Kx', 43)}`;

describe('secret-leak', () => {
  it('passes clean text, including look-alikes', async () => {
    for (const text of [
      'use scikit-learn (sk-learn) and the task-runner',
      'sk-this-is-not-a-key-at-all-really',
      'Bearer authentication-is-described-here',
      'AKIA is a prefix',
      '-----BEGIN PUBLIC KEY-----',
    ]) {
      expect((await secret(text))?.passed, text).toBe(true);
    }
  });

  it.each([
    ['aws-access-key-id', token('AKIA', 'IOSFODNN7EXAMPLE', 16)],
    ['aws-access-key-id', token('ASIA', 'Z9Y8X7W6V5U4T3S2', 16)],
    ['github-token', token('ghp_', 'a1B2c3D4e5', 36)],
    ['github-token', token('ghs_', 'Zz09', 36)],
    ['github-token', token('github_pat_', '11ABCDEFG_x9', 82)],
    ['openai-api-key', token('sk-', 'Ab12Cd34Ef', 48)],
    ['openai-api-key', token('sk-proj-', 'Ab1_-Cd2', 60)],
    ['slack-token', `${token('xoxb-', '1234', 12)}-${token('', 'abcdef', 24)}`],
    ['private-key', '-----BEGIN RSA PRIVATE KEY-----\nMIIE...'],
    ['private-key', '-----BEGIN OPENSSH PRIVATE KEY-----'],
    ['private-key', '-----BEGIN PRIVATE KEY-----'],
    ['jwt', JWT],
    ['bearer-token', `Authorization: Bearer ${token('', 'a9F3kL0pQ2', 40)}`],
  ])('finds %s', async (type, value) => {
    const s = await secret(`config: ${value} end`);
    expect(s?.passed).toBe(false);
    expect(countsOf(s)).toEqual({ [type]: 1 });
    expect(JSON.stringify(s)).not.toContain(value.slice(0, 12));
  });

  it('counts a JWT sent as a bearer token once, as a JWT', async () => {
    expect(countsOf(await secret(`Authorization: Bearer ${JWT}`))).toEqual({ jwt: 1 });
  });

  it('reports kinds and counts, and honours types', async () => {
    const text = `${token('AKIA', 'ABCDEFGH12345678', 16)} and ${token('AKIA', 'QRSTUVWX12345678', 16)} ${JWT}`;
    const s = await secret(text);
    expect(s?.explanation).toBe('found secrets: jwt: 1, aws-access-key-id: 2');
    expect(countsOf(await secret(text, { types: ['jwt'] }))).toEqual({ jwt: 1 });
  });
});
