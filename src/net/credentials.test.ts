import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import {
  type CredentialGrant,
  type CredentialRef,
  createCredentialResolver,
  credentialGrantKey,
  describeCredential,
  resolveCredential,
} from './index.js';

/** Every value below is this sentinel or contains it; no error may. */
const SENTINEL = 'SENTINEL-credential-5e7a20';

function expectNoSecret(err: TouchstoneError): void {
  const seen = [
    err.message,
    JSON.stringify(err),
    JSON.stringify(err.details),
    String(err.cause ?? ''),
    err.stack ?? '',
  ].join('\n');
  expect(seen).not.toContain(SENTINEL);
}

async function failure(fn: () => unknown): Promise<TouchstoneError> {
  try {
    await fn();
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

describe('resolveCredential (env only, used by judges)', () => {
  it('reads the named variable from the environment handed in', () => {
    expect(resolveCredential({ env: 'JUDGE_KEY' }, { JUDGE_KEY: 'sk-1\n' })).toBe('sk-1');
  });

  it('is undefined for unset or blank variables', () => {
    expect(resolveCredential({ env: 'JUDGE_KEY' }, {})).toBeUndefined();
    expect(resolveCredential({ env: 'JUDGE_KEY' }, { JUDGE_KEY: undefined })).toBeUndefined();
    expect(resolveCredential({ env: 'JUDGE_KEY' }, { JUDGE_KEY: '  ' })).toBeUndefined();
  });

  it('does not read inherited properties', () => {
    expect(resolveCredential({ env: 'toString' }, {})).toBeUndefined();
  });
});

describe('CredentialResolver.resolve', () => {
  let root: string;
  let dir: string;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'ts-creds-'));
    dir = join(root, 'secrets');
    mkdirSync(join(dir, 'mlflow'), { recursive: true });
    writeFileSync(join(dir, 'mlflow', 'token'), `${SENTINEL}-file\n`);
    writeFileSync(join(dir, 'mlflow', '.dotted-key'), `${SENTINEL}-dotted`);
    writeFileSync(join(dir, 'mlflow', 'empty'), '\n');
    writeFileSync(join(dir, 'mlflow', 'huge'), `${SENTINEL}${'x'.repeat(70_000)}`);
    mkdirSync(join(dir, 'mlflow', 'adir'));
    // What sits next to sources.dir must stay out of reach.
    mkdirSync(join(root, 'outside'));
    writeFileSync(join(root, 'outside', 'key'), `${SENTINEL}-outside`);
    writeFileSync(join(root, 'top-level'), `${SENTINEL}-top`);
    // A Kubernetes secret volume: keys are symlinks through ..data to a timestamped directory.
    const k8s = join(dir, 'langfuse');
    mkdirSync(join(k8s, '..2024_01_01_00_00_00.1'), { recursive: true });
    writeFileSync(join(k8s, '..2024_01_01_00_00_00.1', 'keys'), `pk:${SENTINEL}\n`);
    symlinkSync('..2024_01_01_00_00_00.1', join(k8s, '..data'));
    symlinkSync(join('..data', 'keys'), join(k8s, 'keys'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const resolver = () =>
    createCredentialResolver({
      env: { MLFLOW_TOKEN: ` ${SENTINEL}-env\n`, BLANK: '   ' },
      dir,
      grants: [],
    });

  it('reads env references from the environment handed in, trimmed', async () => {
    expect(await resolver().resolve({ env: 'MLFLOW_TOKEN' })).toBe(`${SENTINEL}-env`);
  });

  it('reads file references from <dir>/<secret>/<key>, trailing newline dropped', async () => {
    expect(await resolver().resolve({ file: 'mlflow/token' })).toBe(`${SENTINEL}-file`);
    expect(await resolver().resolve({ file: 'mlflow/.dotted-key' })).toBe(`${SENTINEL}-dotted`);
  });

  it('reads a Kubernetes secret volume (symlinked keys)', async () => {
    expect(await resolver().resolve({ file: 'langfuse/keys' })).toBe(`pk:${SENTINEL}`);
  });

  it('re-reads the file at every use, so rotation needs no restart', async () => {
    const r = resolver();
    const file = join(dir, 'mlflow', 'rotating');
    writeFileSync(file, `${SENTINEL}-v1\n`);
    expect(await r.resolve({ file: 'mlflow/rotating' })).toBe(`${SENTINEL}-v1`);
    writeFileSync(file, `${SENTINEL}-v2\n`);
    expect(await r.resolve({ file: 'mlflow/rotating' })).toBe(`${SENTINEL}-v2`);
    rmSync(file);
    const err = await failure(() => r.resolve({ file: 'mlflow/rotating' }));
    expect(err.code).toBe('CREDENTIAL_UNREADABLE');
  });

  it.each([
    [{ env: 'UNSET_VAR' }, 'UNSET_VAR', 'unset or blank'],
    [{ env: 'BLANK' }, 'BLANK', 'unset or blank'],
    [{ file: 'mlflow/missing' }, 'mlflow/missing', 'does not exist'],
    [{ file: 'nosuch/key' }, 'nosuch/key', 'does not exist'],
    [{ file: 'mlflow/empty' }, 'mlflow/empty', 'empty'],
    [{ file: 'mlflow/huge' }, 'mlflow/huge', 'larger than'],
    [{ file: 'mlflow/adir' }, 'mlflow/adir', 'not a file'],
  ] as [CredentialRef, string, string][])(
    'refuses %j as unreadable, naming it and not its value',
    async (ref, named, why) => {
      const err = await failure(() => resolver().resolve(ref));
      expect(err.code).toBe('CREDENTIAL_UNREADABLE');
      expect(err.kind).toBe('failed_precondition');
      expect(err.message).toContain(named);
      expect(err.message).toContain(why);
      expectNoSecret(err);
    },
  );

  it.each([
    '../outside',
    '../top-level',
    '..',
    'mlflow/..',
    'mlflow/.',
    './token',
    '../outside/key',
    '/etc/passwd',
    'mlflow/token/extra',
    'mlflow\\token',
    'mlflow/..data',
    'langfuse/..data',
    '',
    'mlflow/',
    '/token',
    'mlflow/to ken',
  ])(
    'refuses the file reference %j (path traversal or malformed) without reading',
    async (file) => {
      const err = await failure(() => resolver().resolve({ file }));
      expect(err.code).toBe('CREDENTIAL_INVALID_REF');
      expect(err.kind).toBe('invalid_argument');
      expectNoSecret(err);
    },
  );

  it.each([
    [{ env: 'has-dash' }],
    [{ env: '1LEADING' }],
    [{ env: '' }],
    [{ env: 'A', file: 'a/b' }],
    [{}],
  ] as unknown as [CredentialRef][])('refuses the malformed reference %j', async (ref) => {
    expect((await failure(() => resolver().resolve(ref))).code).toBe('CREDENTIAL_INVALID_REF');
  });
});

describe('CredentialResolver.checkGrant', () => {
  const grants: CredentialGrant[] = [
    { env: 'MLFLOW_TOKEN', projects: ['team-a'], hosts: ['mlflow.example.com'] },
    { env: 'SHARED_KEY', projects: ['*'] },
    { env: 'TEAM_KEY', projects: ['team-*', 'ops'], hosts: ['*.svc.cluster.local', '10.0.0.0/8'] },
    { env: 'file:langfuse/keys', projects: ['team-b'], hosts: ['cloud.langfuse.com'] },
    { env: 'SPLIT', projects: ['team-a'], hosts: ['a.example.com'] },
    { env: 'SPLIT', projects: ['team-b'], hosts: ['b.example.com'] },
  ];
  const r = createCredentialResolver({
    env: { MLFLOW_TOKEN: SENTINEL },
    dir: '/nonexistent',
    grants,
  });

  it.each([
    [{ env: 'MLFLOW_TOKEN' }, 'team-a', 'mlflow.example.com'],
    [{ env: 'MLFLOW_TOKEN' }, 'team-a', 'MLFLOW.example.com.'],
    [{ env: 'SHARED_KEY' }, 'anyone', 'anywhere.example.org'],
    [{ env: 'TEAM_KEY' }, 'team-x', 'mlflow.ns.svc.cluster.local'],
    [{ env: 'TEAM_KEY' }, 'ops', '10.20.30.40'],
    [{ file: 'langfuse/keys' }, 'team-b', 'cloud.langfuse.com'],
    [{ env: 'SPLIT' }, 'team-b', 'b.example.com'],
  ] as [CredentialRef, string, string][])('grants %j to %s for %s', (ref, project, host) => {
    expect(() => r.checkGrant(ref, project, host)).not.toThrow();
  });

  it.each([
    [{ env: 'UNLISTED' }, 'team-a', 'mlflow.example.com', 'is not granted to any project'],
    [{ env: 'MLFLOW_TOKEN' }, 'team-b', 'mlflow.example.com', 'not granted to project "team-b"'],
    [{ env: 'MLFLOW_TOKEN' }, 'team-a', 'evil.example.com', 'not for host evil.example.com'],
    [{ env: 'TEAM_KEY' }, 'team', 'x.svc.cluster.local', 'not granted to project "team"'],
    [{ env: 'TEAM_KEY' }, 'ops', '11.0.0.1', 'not for host 11.0.0.1'],
    [{ env: 'TEAM_KEY' }, 'ops', 'svc.cluster.local', 'not for host'],
    [{ file: 'langfuse/keys' }, 'team-a', 'cloud.langfuse.com', 'not granted to project'],
    [{ env: 'langfuse/keys' }, 'team-b', 'cloud.langfuse.com', ''],
    [{ file: 'other/keys' }, 'team-b', 'cloud.langfuse.com', 'file other/keys is not granted'],
    // A grant for one project does not lend its hosts to another.
    [{ env: 'SPLIT' }, 'team-a', 'b.example.com', 'not for host b.example.com'],
  ] as [CredentialRef, string, string, string][])(
    'refuses %j for %s at %s',
    async (ref, project, host, why) => {
      const err = await failure(() => r.checkGrant(ref, project, host));
      expect(['CREDENTIAL_NOT_GRANTED', 'CREDENTIAL_INVALID_REF']).toContain(err.code);
      expect(err.message).toContain(why);
      expectNoSecret(err);
    },
  );

  it('matches project patterns without backtracking (a regex of `*a*a*…` took seconds)', async () => {
    const pattern = `${'*a'.repeat(31)}*`.slice(0, 62); // 63 characters at most, as config allows
    const hostile = createCredentialResolver({
      env: {},
      dir: '/x',
      grants: [{ env: 'K', projects: [`${pattern}c`] }],
    });
    const started = performance.now();
    const err = await failure(() =>
      hostile.checkGrant({ env: 'K' }, 'a'.repeat(63), 'h.example.com'),
    );
    expect(err.code).toBe('CREDENTIAL_NOT_GRANTED');
    expect(() =>
      hostile.checkGrant({ env: 'K' }, `${'a'.repeat(40)}c`, 'h.example.com'),
    ).not.toThrow();
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('names the grant to add, in the config syntax', async () => {
    const err = await failure(() => r.checkGrant({ file: 'x/y' }, 'p', 'h.example.com'));
    expect(err.code).toBe('CREDENTIAL_NOT_GRANTED');
    expect(err.kind).toBe('permission_denied');
    expect(err.message).toContain('{env: "file:x/y", projects: ["p"], hosts: ["h.example.com"]}');
  });

  it('resolveGranted checks before it reads', async () => {
    const refused = await failure(() =>
      r.resolveGranted({ env: 'MLFLOW_TOKEN' }, 'team-b', 'mlflow.example.com'),
    );
    expect(refused.code).toBe('CREDENTIAL_NOT_GRANTED');
    expectNoSecret(refused);
    expect(await r.resolveGranted({ env: 'MLFLOW_TOKEN' }, 'team-a', 'mlflow.example.com')).toBe(
      SENTINEL,
    );
  });

  it('rejects a malformed host pattern at construction, with its path', () => {
    expect(() =>
      createCredentialResolver({
        env: {},
        dir: '/x',
        grants: [{ env: 'A', projects: ['p'], hosts: ['ok.example.com', 'a.*.example.com'] }],
      }),
    ).toThrow(/credentials\.grants\[0\]\.hosts\[1\]/);
  });

  it('names credentials the way grants and messages do', () => {
    expect(credentialGrantKey({ env: 'A' })).toBe('A');
    expect(credentialGrantKey({ file: 's/k' })).toBe('file:s/k');
    expect(describeCredential({ file: 's/k' })).toBe('file s/k');
  });
});
