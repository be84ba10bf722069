import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../core/index.js';
import { envLayer, isLoopbackListen, loadConfig, parseDuration } from './index.js';

function yamlFile(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'ts-config-')), 'config.yaml');
  writeFileSync(file, text);
  return file;
}

function errorOf(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected an error');
}

describe('config loading', () => {
  it('has the documented defaults', () => {
    const c = loadConfig();
    expect(c.listen).toBe('127.0.0.1:4318');
    expect(c.data_dir).toBe('./.touchstone');
    expect(c.store.driver).toBe('sqlite');
    expect(c.auth).toBeUndefined();
    expect(c.shutdown_timeout).toBe(10_000);
    expect(Object.isFrozen(c.store)).toBe(true);
  });

  it('layers defaults → YAML → env → flags', () => {
    const file = yamlFile(
      'listen: 127.0.0.1:9000\nstore:\n  driver: postgres\n  url: postgres://file/db\nlog_level: debug\n',
    );
    const c = loadConfig({
      file,
      env: {
        TOUCHSTONE_STORE__URL: 'postgres://env/db',
        TOUCHSTONE_LOG_LEVEL: 'warn',
        TOUCHSTONE_LIMITS__MAX_BODY_BYTES: '1024',
        PATH: '/bin',
      },
      overrides: { log_level: 'error' },
    });
    expect(c.listen).toBe('127.0.0.1:9000');
    expect(c.store).toMatchObject({ driver: 'postgres', url: 'postgres://env/db' });
    expect(c.limits.max_body_bytes).toBe(1024);
    expect(c.log_level).toBe('error');
  });

  it('nests environment keys on double underscores and parses scalars', () => {
    expect(
      envLayer({
        TOUCHSTONE_JUDGES__GPT__MODEL: 'gpt-4o',
        TOUCHSTONE_NO_AUTH: 'true',
        TOUCHSTONE_API_KEY: 'x',
      }),
    ).toEqual({
      judges: { gpt: { model: 'gpt-4o' } },
      no_auth: true,
    });
  });

  it('reports every invalid key at once, each with its path', () => {
    const file = yamlFile(
      'listen: nowhere\nstore:\n  driver: oracle\nlimits:\n  max_body_bytes: -1\nbogus: 1\njudges:\n  j1:\n    model: m\n    timeout: soon\n',
    );
    const err = errorOf(() => loadConfig({ file }));
    const paths = err.details.map((d) => d.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'listen',
        'store.driver',
        'limits.max_body_bytes',
        'bogus',
        'judges.j1.endpoint',
        'judges.j1.timeout',
      ]),
    );
    expect(err.message).toContain('store.driver');
  });

  it('accepts the camelCase judge keys beside snake_case', () => {
    const c = loadConfig({
      overrides: {
        judges: {
          j: {
            endpoint: 'http://127.0.0.1:1/v1',
            model: 'm',
            maxConcurrency: 2,
            requestsPerSecond: 5,
            timeout: '5s',
          },
        },
        default_judge: 'j',
      },
    });
    expect(c.judges.j).toMatchObject({ max_concurrency: 2, requests_per_second: 5, timeout: 5000 });
  });

  it('requires store.url for postgres and a known default_judge', () => {
    const err = errorOf(() =>
      loadConfig({ overrides: { store: { driver: 'postgres' }, default_judge: 'x' } }),
    );
    expect(err.details.map((d) => d.path)).toEqual(
      expect.arrayContaining(['store.url', 'default_judge']),
    );
  });

  it('refuses a non-loopback listen address without auth unless --no-auth', () => {
    const err = errorOf(() => loadConfig({ overrides: { listen: '0.0.0.0:4318' } }));
    expect(err.details[0]?.path).toBe('auth');
    expect(loadConfig({ overrides: { listen: '0.0.0.0:4318', no_auth: true } }).no_auth).toBe(true);
    expect(loadConfig({ overrides: { listen: '0.0.0.0:4318', auth: {} } }).auth).toEqual({
      api_keys: true,
    });
  });

  it('reports YAML syntax errors with a line', () => {
    const err = errorOf(() => loadConfig({ file: yamlFile('store:\n  driver: [unclosed\n') }));
    expect(err.details[0]?.path).toMatch(/^line \d+/);
  });

  it('knows loopback addresses', () => {
    expect(isLoopbackListen('127.0.0.1:1')).toBe(true);
    expect(isLoopbackListen('localhost:1')).toBe(true);
    expect(isLoopbackListen('[::1]:1')).toBe(true);
    expect(isLoopbackListen('0.0.0.0:1')).toBe(false);
    expect(isLoopbackListen('10.0.0.1:1')).toBe(false);
  });

  it('parses Go-style durations', () => {
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('720h')).toBe(2_592_000_000);
    expect(parseDuration('0')).toBe(0);
    expect(parseDuration('10')).toBeUndefined();
    expect(parseDuration('5 minutes')).toBeUndefined();
  });
});
