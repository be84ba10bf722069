import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, freePort, type ServerProcess, startServer } from '../../test/support/process.js';

/**
 * Which server or data dir a command works on when it names none, run as a user would: the real
 * CLI process in a working directory of its own, beside a real server.
 */
// Each CLI process takes seconds on a loaded machine.
describe('the CLI without --server', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-target-'));
  let server: ServerProcess;
  let listen: string;

  beforeAll(async () => {
    listen = `127.0.0.1:${await freePort()}`;
    server = await startServer(['--data-dir', join(dir, 'server-data'), '--listen', listen]);
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      'apiVersion: touchstone.dev/v1alpha1\nkind: OnlineEvalPolicy\nmetadata: {name: on-the-server}\nspec:\n  stages: [{evaluators: [{ref: tool-errors}]}]\n',
    );
    const applied = cli(['policy', 'apply', '-f', policy, '--server', listen]);
    expect(applied.code, applied.stderr).toBe(0);
  });
  afterAll(() => {
    server?.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const fresh = (name: string) => {
    const cwd = join(dir, name);
    mkdirSync(cwd);
    return cwd;
  };

  it('takes --server and TOUCHSTONE_SERVER as HOST:PORT without a scheme', () => {
    const flag = cli(['policy', 'list', '--server', listen]);
    expect(flag.code, flag.stderr).toBe(0);
    expect(flag.stdout).toContain('on-the-server');
    const env = cli(['policy', 'list'], { TOUCHSTONE_SERVER: listen });
    expect(env.code, env.stderr).toBe(0);
    expect(env.stdout).toContain('on-the-server');
    expect(env.stderr).toBe('');
    const bad = cli(['policy', 'list', '--server', 'ftp://example.com']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--server must be an http:// or https:// URL');
  });

  it('in a directory without a data dir, uses the server running at the listen address and says so', () => {
    const cwd = fresh('elsewhere');
    const r = cli(['policy', 'list'], { TOUCHSTONE_LISTEN: listen }, cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('on-the-server');
    expect(r.stderr).toBe(
      `touchstone: no --server given and no data dir here; using the server running at http://${listen}\n`,
    );
  });

  it('with no server there either, names the new data dir it uses', async () => {
    const cwd = fresh('alone');
    const nobody = `127.0.0.1:${await freePort()}`;
    const r = cli(['policy', 'list'], { TOUCHSTONE_LISTEN: nobody }, cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('on-the-server');
    expect(r.stderr).toBe(
      `touchstone: no --server given and no server at http://${nobody}; using a new data dir ${join(cwd, '.touchstone')}\n`,
    );
    // Now there is one: it is used (and named), even with the server running.
    const again = cli(['policy', 'list'], { TOUCHSTONE_LISTEN: listen }, cwd);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).not.toContain('on-the-server');
    expect(again.stderr).toBe(
      `touchstone: no --server given; using the data dir ${join(cwd, '.touchstone')}\n`,
    );
  });

  it('says nothing when the data dir is named', () => {
    const cwd = fresh('named');
    const flag = cli(['policy', 'list', '--data-dir', join(dir, 'server-data')], {}, cwd);
    expect(flag.code, flag.stderr).toBe(0);
    expect(flag.stdout).toContain('on-the-server');
    expect(flag.stderr).toBe('');
    const env = cli(['policy', 'list'], { TOUCHSTONE_DATA_DIR: join(dir, 'server-data') }, cwd);
    expect(env.stdout).toContain('on-the-server');
    expect(env.stderr).toBe('');
  });

  it('names TOUCHSTONE_SERVER and TOUCHSTONE_API_KEY in --help', () => {
    const help = cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/TOUCHSTONE_SERVER\s+server for commands given no --server/);
    expect(help.stdout).toMatch(/TOUCHSTONE_API_KEY\s+API key sent to the server/);
  });
});
