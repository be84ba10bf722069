import { describe, expect, it } from 'vitest';
import {
  compileKeyMatcher,
  globMatch,
  globProblem,
  KEY_ID,
  KEY_PLAIN,
  KEY_SECRET,
  wordForm,
} from './keys.js';

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

describe('globMatch', () => {
  it.each([
    ['*', '', true],
    ['*', 'anything.at.all', true],
    ['a*b', 'ab', true],
    ['a*b', 'axxb', true],
    ['a*b', 'axxbc', false],
    ['a?c', 'abc', true],
    ['a?c', 'ac', false],
    ['*a*a*a*b', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', false],
    ['*.password', 'db.password', true],
  ])('%s against %s → %s', (glob, text, expected) => {
    expect(globMatch(glob, text)).toBe(expected);
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
});
