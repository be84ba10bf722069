import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli } from '../../test/support/process.js';

/** `touchstone keys create --expires-at`, the real process on a local data dir. */

describe('touchstone keys create --expires-at', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-cli-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const create = (expiresAt: string) =>
    cli([
      'keys',
      'create',
      '--project',
      'p1',
      '--role',
      'viewer',
      '--expires-at',
      expiresAt,
      '--data-dir',
      dir,
      '--json',
    ]);

  it('refuses an expiry in the past with a usage error and creates nothing', () => {
    const r = create('2001-01-01T00:00:00Z');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/expiresAt is not in the future/);
    expect(r.stdout).not.toMatch(/tsk_/);
    const listed = cli(['keys', 'list', '--data-dir', dir, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([]);
  });

  it('creates a key that expires in the future', () => {
    const at = new Date(Date.now() + 86_400_000).toISOString();
    const r = create(at);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).key.expiresAt).toBe(at);
  });
});
