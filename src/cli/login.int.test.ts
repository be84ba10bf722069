import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { startTestProvider, type TestProvider } from '../../test/support/oidc-provider.js';
import { type CliResult, cliAsync, startCli } from '../../test/support/process.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';

/**
 * `touchstone login` / `logout` / `whoami`: the real CLI process signs in at a real OIDC provider
 * (device flow, and the browser flow on a loopback redirect) and talks to a real server that
 * accepts that provider's ID tokens.
 */

const CLIENT = 'touchstone-cli';
const SCOPE = 'openid email groups';

/** A login left running so the test can act as the person signing in. */
const startLogin = (args: string[], env: Record<string, string>) =>
  startCli(args, { TOUCHSTONE_API_KEY: '', TOUCHSTONE_SERVER: '', ...env });

// Each test runs one to five CLI processes, several seconds each on a loaded machine.
describe('touchstone login against a real identity provider', { timeout: 120_000 }, () => {
  let idp: TestProvider;
  let t: TestApp;
  let server: string;
  const dirs: string[] = [];

  /** A fresh config dir (where sign-ins are kept) for one test. */
  function configDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-cli-login-'));
    dirs.push(dir);
    return join(dir, 'config');
  }
  const credentials = (dir: string) => join(dir, 'credentials.json');
  const loginArgs = (...extra: string[]) => [
    'login',
    '--server',
    server,
    '--issuer',
    idp.issuer,
    '--client-id',
    CLIENT,
    '--scope',
    SCOPE,
    ...extra,
  ];
  const run = (args: string[], dir: string, env: Record<string, string> = {}) =>
    cliAsync(args, { TOUCHSTONE_API_KEY: '', TOUCHSTONE_CONFIG_DIR: dir, ...env });

  /** Signs `login` in with the browser flow, as the person at the browser would. */
  async function browserLogin(dir: string, login: string): Promise<CliResult> {
    const cli = startLogin(loginArgs('--flow', 'browser', '--no-browser'), {
      TOUCHSTONE_CONFIG_DIR: dir,
    });
    const [, url] = await cli.stderrMatch(/to sign in, open (\S+)\n/);
    const back = await idp.signIn(url as string, login);
    const res = await fetch(back);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/Signed in to Touchstone/);
    return cli.done;
  }

  beforeAll(async () => {
    idp = await startTestProvider(
      [{ id: CLIENT, claims: {}, redirectUris: ['http://127.0.0.1/callback'] }],
      {
        accounts: {
          ana: { email: 'ana@example.com', groups: ['agents-team'] },
          stranger: { email: 'who@example.com', groups: ['elsewhere'] },
        },
      },
    );
    t = await testApp({
      listen: '127.0.0.1:0',
      auth: {
        allow_hosts: ['127.0.0.1'],
        oidc: [
          {
            issuer: idp.issuer,
            audiences: [CLIENT],
            mappings: [{ groups: ['agents-team'], project: 'agents', roles: ['editor'] }],
          },
        ],
      },
    });
    server = `http://${await t.app.listen()}`;
  });
  afterAll(async () => {
    await t.close();
    await idp.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('signs in with the device flow; the token is stored 0600 and later commands act as that person', async () => {
    const dir = configDir();
    const cli = startLogin(loginArgs(), { TOUCHSTONE_CONFIG_DIR: dir });
    const [, code] = await cli.stderrMatch(/enter the code (\S+)\n/);
    await idp.approveDevice(code as string, 'ana');
    const login = await cli.done;
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout).toMatch(
      new RegExp(
        `^signed in to ${server} as ana \\(ana@example.com\\): project agents, roles editor; until `,
      ),
    );

    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(credentials(dir)).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(credentials(dir), 'utf8'));
    const entry = stored.servers[server];
    expect(entry).toMatchObject({ issuer: idp.issuer, client_id: CLIENT, subject: 'ana' });
    expect(Object.keys(entry).sort()).toEqual(
      ['client_id', 'email', 'expires_at', 'id_token', 'issuer', 'subject'].sort(),
    );
    // The token is never printed.
    expect(login.stdout + login.stderr).not.toContain(entry.id_token);

    const who = await run(['whoami', '--server', server, '--json'], dir);
    expect(who.code, who.stderr).toBe(0);
    expect(JSON.parse(who.stdout)).toMatchObject({
      kind: 'oidc',
      subject: 'ana',
      email: 'ana@example.com',
      project: 'agents',
      roles: ['editor'],
    });
    const text = await run(['whoami'], dir, { TOUCHSTONE_SERVER: server });
    expect(text.stdout).toMatch(
      /^ana \(ana@example.com\), signed in at http:\/\/127\.0\.0\.1:\d+ until /,
    );
  });

  it('signs in with the browser flow on a loopback redirect; logout forgets the sign-in', async () => {
    const dir = configDir();
    const login = await browserLogin(dir, 'ana');
    expect(login.code, login.stderr).toBe(0);
    expect(login.stderr).toMatch(/code_challenge_method=S256/);
    expect(statSync(credentials(dir)).mode & 0o777).toBe(0o600);
    const who = await run(['whoami', '--server', server, '--json'], dir);
    expect(JSON.parse(who.stdout)).toMatchObject({ kind: 'oidc', subject: 'ana' });

    const logout = await run(['logout', '--server', server], dir);
    expect(logout.code, logout.stderr).toBe(0);
    expect(logout.stdout).toBe(
      `signed out of ${server}: its sign-in is removed from ${credentials(dir)}\n`,
    );
    expect(existsSync(credentials(dir))).toBe(false);
    const again = await run(['logout', '--server', server], dir);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`not signed in to ${server}; nothing to remove\n`);

    const after = await run(['whoami', '--server', server], dir);
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(/^touchstone: UNAUTHENTICATED: /);
    expect(after.stderr).toMatch(/or run touchstone login/);
  });

  it('an API key in TOUCHSTONE_API_KEY wins over a stored sign-in', async () => {
    const dir = configDir();
    expect((await browserLogin(dir, 'ana')).code).toBe(0);
    const key = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['viewer'] });
    const who = await run(['whoami', '--server', server, '--json'], dir, {
      TOUCHSTONE_API_KEY: key.secret,
    });
    expect(JSON.parse(who.stdout)).toMatchObject({ kind: 'key', project: 'p1' });
  });

  it('refuses a callback whose state is not the one it sent, and stores nothing', async () => {
    const dir = configDir();
    const cli = startLogin(loginArgs('--flow', 'browser', '--no-browser'), {
      TOUCHSTONE_CONFIG_DIR: dir,
    });
    const [, url] = await cli.stderrMatch(/to sign in, open (\S+)\n/);
    const back = new URL(await idp.signIn(url as string, 'ana'));
    back.searchParams.set('state', 'forged-state');
    const res = await fetch(back);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/sign-in refused: .*another state/);
    const r = await cli.done;
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/another state than this login sent/);
    expect(existsSync(credentials(dir))).toBe(false);
  });

  it('a sign-in the server maps to nothing fails the login and stores nothing', async () => {
    const dir = configDir();
    const r = await browserLogin(dir, 'stranger');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/refuses the token \(nothing was stored\): OIDC_NO_MAPPING/);
    expect(existsSync(credentials(dir))).toBe(false);
  });

  it('an expired stored sign-in, or one the server refuses, says to run touchstone login', async () => {
    const dir = configDir();
    mkdirSync(dir, { recursive: true });
    const now = Math.floor(Date.now() / 1000);
    const entry = async (claims: Record<string, unknown>) => ({
      issuer: idp.issuer,
      client_id: CLIENT,
      id_token: await idp.sign({
        iss: idp.issuer,
        sub: 'ana',
        groups: ['agents-team'],
        ...claims,
      }),
      expires_at: new Date(((claims.exp as number) ?? now + 600) * 1000).toISOString(),
      subject: 'ana',
    });
    const expired = await entry({ aud: CLIENT, exp: now - 10 });
    writeFileSync(
      credentials(dir),
      JSON.stringify({ version: 1, servers: { [server]: expired } }),
      {
        mode: 0o600,
      },
    );
    const r = await run(['whoami', '--server', server], dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `touchstone: your sign-in to ${server} expired at ${expired.expires_at}; run touchstone login\n`,
    );

    // Not expired, but for another audience: the server refuses it.
    const refused = await entry({ aud: 'someone-else', exp: now + 600 });
    writeFileSync(credentials(dir), JSON.stringify({ version: 1, servers: { [server]: refused } }));
    const r2 = await run(['whoami', '--server', server], dir);
    expect(r2.code).toBe(1);
    expect(r2.stderr).toMatch(/^touchstone: OIDC_TOKEN_REFUSED: /);
    expect(r2.stderr).toContain(`Your sign-in to ${server} was refused; run touchstone login.`);
    expect(r2.stderr).not.toContain(refused.id_token);
  });

  it('refuses an issuer whose discovery names another issuer', async () => {
    const impostor = await startTestProvider(
      [{ id: CLIENT, claims: {}, redirectUris: ['http://127.0.0.1/callback'] }],
      { metadataIssuer: () => idp.issuer },
    );
    try {
      const dir = configDir();
      const r = await run(
        ['login', '--server', server, '--issuer', impostor.issuer, '--client-id', CLIENT],
        dir,
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `touchstone: the discovery document of ${impostor.issuer} names ${idp.issuer}, not ${impostor.issuer}; a provider must name itself exactly as --issuer does\n`,
      );
      expect(existsSync(credentials(dir))).toBe(false);
    } finally {
      await impostor.close();
    }
  });

  it('needs a server, an issuer and a client ID', async () => {
    const dir = configDir();
    const none = await run(['login', '--issuer', idp.issuer, '--client-id', CLIENT], dir);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(
      /touchstone login needs a server: --server URL or TOUCHSTONE_SERVER/,
    );
    const first = await run(['login', '--server', server], dir);
    expect(first.code).toBe(2);
    expect(first.stderr).toMatch(/needs --issuer URL and --client-id ID the first time/);
  });
});
