import { describe, expect, it } from 'vitest';
import { seededRandom as random } from '../../test/support/random.js';
import { compileKeyMatcher, globProblem, KEY_ID, KEY_PLAIN, KEY_SECRET, wordForm } from './keys.js';

const defaults = compileKeyMatcher([]);

describe('default key rules', () => {
  it.each([
    'password',
    'passwd',
    'authorization',
    'cookie',
    'set-cookie',
    'token',
    'secret',
    'api_key',
    'api-key',
    'apikey',
    'private_key',
  ])('redacts the default name %s, in any case, whole or as the final segment', (name) => {
    expect(defaults.classify(name)).toBe(KEY_SECRET);
    expect(defaults.classify(name.toUpperCase())).toBe(KEY_SECRET);
    expect(defaults.classify(`http.request.header.${name}`)).toBe(KEY_SECRET);
    expect(defaults.classify(`DB.${name.toUpperCase()}`)).toBe(KEY_SECRET);
  });

  it.each([
    'access_token',
    'refresh_token',
    'client_secret',
    'db_password',
    'openai_api_key',
    'llm.provider.openai_api_key',
    'OAUTH_ACCESS_TOKEN',
  ])('redacts names ending _token/_secret/_password/_api_key: %s', (key) => {
    expect(defaults.classify(key)).toBe(KEY_SECRET);
  });

  it.each([
    'accessToken',
    'clientSecret',
    'apiKey',
    'privateKey',
    'setCookie',
    'http.request.header.x-api-key',
    'http.response.header.x-csrf-token',
    'X-Auth-Token',
  ])('redacts the camelCase and header spellings of the defaults: %s', (key) => {
    expect(defaults.classify(key)).toBe(KEY_SECRET);
  });

  it.each([
    'gen_ai.usage.input_tokens',
    'gen_ai.usage.output_tokens',
    'gen_ai.request.max_tokens',
    'llm.token_count.prompt',
    'llm.token_count.total',
    'input_tokens',
    'max_tokens',
    'maxTokens',
    'tokens',
    'token_count',
    'tokenizer',
    'tokenizer.name',
    'secretary_name',
    'password_policy',
    'authorization_url',
    'cookie_consent',
    'gen_ai.request.model',
    'service.name',
  ])('keeps token counts and look-alike keys readable: %s', (key) => {
    expect(defaults.classify(key)).toBe(KEY_PLAIN);
  });

  it('recognises trace and span id keys so their hex values are kept', () => {
    for (const key of ['traceId', 'spanId', 'parentSpanId', 'trace_id', 'otel.span_id']) {
      expect(defaults.classify(key)).toBe(KEY_ID);
    }
  });

  it('gives the same answer from its cache, also past the cache size', () => {
    for (let i = 0; i < 10_000; i++) defaults.classify(`k${i}`);
    expect(defaults.classify('password')).toBe(KEY_SECRET);
    expect(defaults.classify('password')).toBe(KEY_SECRET);
    expect(defaults.classify('k1')).toBe(KEY_PLAIN);
  });
});

describe('default key names beyond the spec', () => {
  it.each([
    'proxy-authorization',
    'http.request.header.proxy-authorization',
    'Proxy-Authorization',
    'aws_secret_access_key',
    'AWS_SECRET_ACCESS_KEY',
    'SecretAccessKey',
    'secret_access_key',
    'secret_key',
    'secretKey',
    'minio.access_key',
    'accessKey',
    'passphrase',
    'tls.passphrase',
    'credentials',
    'aws.credentials',
    'ssh_private_key',
    'jwtPrivateKey',
    'django_secret_key',
    'DJANGO_SECRET_KEY',
    'key_passphrase',
    'keyPassphrase',
  ])('redacts %s', (key) => {
    expect(defaults.classify(key)).toBe(KEY_SECRET);
  });

  it.each([
    'gen_ai.usage.input_tokens',
    'max_tokens',
    'maxTokens',
    'access_key_id',
    'AccessKeyId',
    'private_key_id',
    'secret_key_ref',
    'passphrase_hint',
    'has_credentials',
    'credentials_url',
    'credential',
  ])('keeps %s readable', (key) => {
    expect(defaults.classify(key)).toBe(KEY_PLAIN);
  });

  it('lists a literal of every new name for the JSON pre-check', () => {
    for (const key of ['accessKey', 'ACCESS-KEY', 'passphrase', 'credentials']) {
      expect(defaults.literals?.some((l) => key.toLowerCase().includes(l))).toBe(true);
    }
  });
});

describe('configured key globs', () => {
  const matcher = compileKeyMatcher(['*_pin', 'Session_ID', 'x-?-sig', 'db.connection_*']);

  it('match case-insensitively over the whole key and its final segment', () => {
    expect(matcher.classify('card_pin')).toBe(KEY_SECRET);
    expect(matcher.classify('user.card_PIN')).toBe(KEY_SECRET);
    expect(matcher.classify('session_id')).toBe(KEY_SECRET);
    expect(matcher.classify('app.SESSION_ID')).toBe(KEY_SECRET);
    expect(matcher.classify('x-a-sig')).toBe(KEY_SECRET);
    expect(matcher.classify('db.connection_string')).toBe(KEY_SECRET);
  });

  it('do not match more than they say', () => {
    expect(matcher.classify('pin')).toBe(KEY_PLAIN);
    expect(matcher.classify('x-ab-sig')).toBe(KEY_PLAIN);
    expect(matcher.classify('session_identity')).toBe(KEY_PLAIN);
    expect(matcher.classify('connection_string')).toBe(KEY_PLAIN);
  });

  it('report their longest literal part for JSON pre-checks, or none for a bare wildcard', () => {
    expect(matcher.literals).toContain('_pin');
    expect(matcher.literals).toContain('db.connection_');
    expect(compileKeyMatcher(['*']).literals).toBeUndefined();
  });
});

describe('globProblem', () => {
  it('accepts plain globs and refuses empty, control characters, classes and escapes', () => {
    expect(globProblem('*_token')).toBeUndefined();
    expect(globProblem('')).toBeDefined();
    expect(globProblem('  ')).toBeDefined();
    expect(globProblem('a\nb')).toBeDefined();
    expect(globProblem('[ab]')).toBeDefined();
    expect(globProblem('{a,b}')).toBeDefined();
    expect(globProblem('a\\*')).toBeDefined();
  });

  it('never quotes the glob', () => {
    expect(globProblem('[hunter2]')).not.toContain('hunter2');
  });
});

describe('wordForm', () => {
  it.each([
    ['accessToken', 'access_token'],
    ['APIKey', 'api_key'],
    ['X-Api-Key', 'x_api_key'],
    ['max_tokens', 'max_tokens'],
    ['maxTokens', 'max_tokens'],
  ])('%s → %s', (key, word) => {
    expect(wordForm(key)).toBe(word);
  });

  /** The regex chain wordForm used to be: the reference its single pass must agree with. */
  const regexWordForm = (segment: string): string =>
    segment
      .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
      .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
      .replace(/[-\s]/g, '_')
      .toLowerCase();

  // Every class the rules look at, their borders, and characters that lowercase specially.
  const ALPHABET = [
    ...'aAzZbBmM09_-.@`[{/:',
    ' ',
    '\t',
    '\n',
    '\v',
    '\u00a0',
    '\u2028',
    '\u3000',
    '\ufeff',
    '\u200b',
    'İ',
    'É',
    'ß',
    '\ud83d',
    '\ude00',
  ];

  it('gives what the regex chain gave, on 50 000 random short keys', () => {
    const rnd = random(20250611);
    for (let n = 0; n < 50_000; n++) {
      let key = '';
      const length = Math.floor(rnd() * 12);
      for (let i = 0; i < length; i++) key += ALPHABET[Math.floor(rnd() * ALPHABET.length)];
      if (wordForm(key) !== regexWordForm(key)) {
        expect({ key, word: wordForm(key) }).toEqual({ key, word: regexWordForm(key) });
      }
    }
  });

  it('gives what the regex chain gave on keys made of letter runs', () => {
    const rnd = random(7);
    const parts = ['A', 'AB', 'ABC', 'a', 'ab', '0', '1a', 'Id', '-', ' '];
    for (let n = 0; n < 20_000; n++) {
      let key = '';
      const count = 1 + Math.floor(rnd() * 6);
      for (let i = 0; i < count; i++) key += parts[Math.floor(rnd() * parts.length)];
      expect(wordForm(key)).toBe(regexWordForm(key));
    }
  });

  it('is linear: a 1 MiB key of capitals takes milliseconds (the regex chain took hours)', () => {
    const started = performance.now();
    expect(wordForm('A'.repeat(1 << 20))).toBe('a'.repeat(1 << 20));
    expect(wordForm(`${'A'.repeat(1 << 20)}b`)).toBe(`${'a'.repeat((1 << 20) - 1)}_ab`);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe('classification of huge keys', () => {
  it('stays linear in the key length, whole and as a final segment', () => {
    const started = performance.now();
    const caps = 'A'.repeat(1 << 20);
    expect(defaults.classify(caps)).toBe(KEY_PLAIN);
    expect(defaults.classify(`db.${caps}`)).toBe(KEY_PLAIN);
    expect(defaults.classify(`${caps}Token`)).toBe(KEY_SECRET);
    expect(defaults.classify(`x.${caps}_SECRET`)).toBe(KEY_SECRET);
    expect(compileKeyMatcher(['*_pin']).classify(`${caps}_PIN`)).toBe(KEY_SECRET);
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});
