import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../core/index.js';
import { envLayer, isLoopbackListen, loadConfig, parseDuration, proxyEnvLayer } from './index.js';

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

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.includes('node_modules'))
    .map((f) => join(dir, f));
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

  it('leaves alone every TOUCHSTONE_ variable that tests, benches and CI read by name', () => {
    // A plumbing variable missing from the exclusions makes every server a test starts refuse
    // its configuration ("unknown field"), so the names are taken from the files that read them.
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const files = [
      join(root, '.ci/run'),
      ...sourceFiles(join(root, 'test')),
      ...sourceFiles(join(root, 'bench')),
    ];
    const names = new Set<string>();
    const read = /(?:process\.env\.|export )(TOUCHSTONE_[A-Z0-9_]*[A-Z0-9])\b/g;
    for (const file of files) {
      for (const m of readFileSync(file, 'utf8').matchAll(read)) {
        if (!m[1]!.includes('__')) names.add(m[1]!);
      }
    }
    expect(names).toContain('TOUCHSTONE_CHROMIUM');
    const env = Object.fromEntries([...names].map((name) => [name, '/x']));
    expect(envLayer(env)).toEqual({});
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

  it('takes ui.sign_in only for an issuer of auth.oidc whose audiences hold its client', () => {
    const oidc = [
      {
        issuer: 'https://login.example.com',
        audiences: ['touchstone-ui'],
        mappings: [{ groups: ['dev'], project: 'default', roles: ['viewer'] }],
      },
    ];
    const signIn = (sign_in: Record<string, unknown>) =>
      loadConfig({ overrides: { auth: { oidc }, ui: { sign_in } } });
    const ok = signIn({ issuer: 'https://login.example.com', client_id: 'touchstone-ui' });
    expect(ok.ui.sign_in).toEqual({
      issuer: 'https://login.example.com',
      client_id: 'touchstone-ui',
      scopes: ['openid', 'email', 'profile'],
    });
    const other = errorOf(() =>
      signIn({ issuer: 'https://elsewhere.example.com', client_id: 'touchstone-ui' }),
    );
    expect(other.details).toEqual([
      {
        path: 'ui.sign_in.issuer',
        message: 'must be the issuer of one of auth.oidc (the UI signs people in there)',
      },
    ]);
    const client = errorOf(() =>
      signIn({ issuer: 'https://login.example.com', client_id: 'touchstone-cli' }),
    );
    expect(client.details.map((d) => d.path)).toEqual(['ui.sign_in.client_id']);
    expect(client.message).toContain('audiences');
    const scopes = errorOf(() =>
      signIn({
        issuer: 'https://login.example.com',
        client_id: 'touchstone-ui',
        scopes: ['email'],
      }),
    );
    expect(scopes.details).toEqual([{ path: 'ui.sign_in.scopes', message: 'must include openid' }]);
    // Without auth.oidc there is no provider to sign in at.
    const none = errorOf(() =>
      loadConfig({
        overrides: { ui: { sign_in: { issuer: 'https://login.example.com', client_id: 'x' } } },
      }),
    );
    expect(none.details.map((d) => d.path)).toEqual(['ui.sign_in.issuer']);
  });

  it('refuses a non-loopback listen address without auth unless --no-auth', () => {
    const err = errorOf(() => loadConfig({ overrides: { listen: '0.0.0.0:4318' } }));
    expect(err.details[0]?.path).toBe('auth');
    expect(loadConfig({ overrides: { listen: '0.0.0.0:4318', no_auth: true } }).no_auth).toBe(true);
    expect(loadConfig({ overrides: { listen: '0.0.0.0:4318', auth: {} } }).auth).toEqual({
      api_keys: true,
      oidc: [],
      allow_hosts: [],
      oidc_timeout: 5_000,
      rules: [],
    });
  });

  it('reports YAML syntax errors with a line', () => {
    const err = errorOf(() => loadConfig({ file: yamlFile('store:\n  driver: [unclosed\n') }));
    expect(err.details[0]?.path).toMatch(/^line \d+/);
  });

  it('refuses an alias bomb in the config file with a clear error (not a crash)', () => {
    const lines = ['l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
    for (let i = 1; i <= 10; i++) lines.push(`l${i}: &l${i} [${Array(9).fill(`*l${i - 1}`)}]`);
    const err = errorOf(() => loadConfig({ file: yamlFile(lines.join('\n')) }));
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toMatch(/is not valid YAML: an alias expands to more than 100 nodes$/);
    const dup = errorOf(() => loadConfig({ file: yamlFile('listen: a:1\nlisten: b:2\n') }));
    expect(dup.details).toEqual([{ path: 'line 2', message: 'duplicate key' }]);
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

  it('has the sources, credentials and proxy defaults', () => {
    const c = loadConfig();
    expect(c.sources).toEqual({
      allow_hosts: [],
      dir: join('.touchstone', 'secrets'),
      max_records_per_second: 200,
      lease_timeout: 120_000,
    });
    expect(loadConfig({ overrides: { sources: { lease_timeout: '30s' } } }).sources).toMatchObject({
      lease_timeout: 30_000,
    });
    const err = errorOf(() => loadConfig({ overrides: { sources: { lease_timeout: '5s' } } }));
    expect(err.details).toEqual([
      expect.objectContaining({ path: 'sources.lease_timeout', message: 'at least 10s' }),
    ]);
    expect(c.credentials).toEqual({ grants: [] });
    expect(c.proxy).toEqual({});
    expect(loadConfig({ overrides: { data_dir: '/var/lib/ts' } }).sources.dir).toBe(
      '/var/lib/ts/secrets',
    );
    expect(loadConfig({ overrides: { sources: { dir: '/run/secrets' } } }).sources.dir).toBe(
      '/run/secrets',
    );
  });

  it('reads sources and credential grants from YAML', () => {
    const file = yamlFile(
      [
        'sources:',
        '  allow_hosts: ["mlflow.internal", "*.svc.cluster.local", "10.0.0.0/8", "[fd00::1]"]',
        '  dir: /etc/touchstone/secrets',
        '  max_records_per_second: 50',
        'credentials:',
        '  grants:',
        '    - {env: MLFLOW_TOKEN, projects: [team-a], hosts: [mlflow.internal]}',
        '    - {env: "file:langfuse/keys", projects: ["*"]}',
        '    - {env: SHARED, projects: ["team-*"], hosts: ["*.example.com", "10.0.0.0/8"]}',
      ].join('\n'),
    );
    const c = loadConfig({ file });
    expect(c.sources.allow_hosts).toHaveLength(4);
    expect(c.sources.max_records_per_second).toBe(50);
    expect(c.credentials.grants).toEqual([
      { env: 'MLFLOW_TOKEN', projects: ['team-a'], hosts: ['mlflow.internal'] },
      { env: 'file:langfuse/keys', projects: ['*'], hosts: [] },
      { env: 'SHARED', projects: ['team-*'], hosts: ['*.example.com', '10.0.0.0/8'] },
    ]);
  });

  it('reports bad host patterns and grants with their paths', () => {
    const err = errorOf(() =>
      loadConfig({
        overrides: {
          sources: { allow_hosts: ['ok.example.com', 'a.*.example.com', '10.0.0.0/40'], rate: 1 },
          webhooks: { allow_hosts: ['**'] },
          credentials: {
            grants: [
              { env: 'file:../etc/passwd', projects: ['p'] },
              { env: 'file:a/b/c', projects: ['p'] },
              { env: 'has-dash', projects: ['p'] },
              { env: 'OK', projects: [] },
              { env: 'OK', projects: ['p'], hosts: ['x.*'] },
              { env: 'OK', projects: ['p'], secret: 'inline' },
            ],
          },
        },
      }),
    );
    const paths = err.details.map((d) => d.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'sources.allow_hosts[1]',
        'sources.allow_hosts[2]',
        'sources.rate',
        'webhooks.allow_hosts[0]',
        'credentials.grants[0].env',
        'credentials.grants[1].env',
        'credentials.grants[2].env',
        'credentials.grants[3].projects',
        'credentials.grants[4].hosts[0]',
        'credentials.grants[5].secret',
      ]),
    );
    expect(paths).not.toContain('sources.allow_hosts[0]');
  });

  it('takes the proxy from the standard variables, lower case first', () => {
    expect(
      loadConfig({
        env: {
          HTTPS_PROXY: 'http://upper:3128',
          https_proxy: 'http://lower:3128',
          HTTP_PROXY: 'http://plain:8080',
          no_proxy: '',
          NO_PROXY: 'localhost,.svc.cluster.local',
        },
      }).proxy,
    ).toEqual({
      https_proxy: 'http://lower:3128',
      http_proxy: 'http://plain:8080',
      no_proxy: 'localhost,.svc.cluster.local',
    });
    expect(proxyEnvLayer({ PATH: '/bin' })).toEqual({});
  });

  it('lets the file and TOUCHSTONE_PROXY__* override the standard variables key by key', () => {
    const file = yamlFile('proxy:\n  no_proxy: "*"\n');
    const c = loadConfig({
      file,
      env: {
        HTTPS_PROXY: 'http://inherited:3128',
        NO_PROXY: 'localhost',
        TOUCHSTONE_PROXY__HTTP_PROXY: 'http://mine:8080',
      },
    });
    expect(c.proxy).toEqual({
      https_proxy: 'http://inherited:3128',
      http_proxy: 'http://mine:8080',
      no_proxy: '*',
    });
    const unset = loadConfig({
      env: { HTTPS_PROXY: 'http://inherited:3128', TOUCHSTONE_PROXY__HTTPS_PROXY: '' },
    });
    expect(unset.proxy.https_proxy).toBe('');
  });

  it('refuses a malformed proxy URL without echoing it (it may hold a password)', () => {
    const err = errorOf(() =>
      loadConfig({ env: { HTTPS_PROXY: 'socks5://me:SENTINEL-pw@proxy:1080' } }),
    );
    expect(err.details.map((d) => d.path)).toEqual(['proxy.https_proxy']);
    expect(`${err.message}${JSON.stringify(err.details)}`).not.toContain('SENTINEL');
    expect(loadConfig({ env: { HTTPS_PROXY: 'proxy.corp:3128' } }).proxy.https_proxy).toBe(
      'proxy.corp:3128',
    );
  });
});
