import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { cliAsync } from '../../test/support/process.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';

/** `touchstone audit list` against a server with auth, as an admin. */
describe('touchstone audit list', () => {
  let t: TestApp;
  let base: string;
  let admin: string;

  beforeAll(async () => {
    t = await testApp({ auth: {}, listen: '127.0.0.1:0' });
    base = `http://${await t.app.listen()}`;
    admin = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['admin'] })).secret;
    const viewer = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['viewer'] });
    await fetch(`${base}/v1alpha1/policies/nope`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${viewer.secret}`, 'x-request-id': 'cli-denied' },
    });
    await t.app.audit.flush();
  });
  afterAll(() => t.close());

  it('prints the refusal, filtered by outcome, as JSON and as a table', async () => {
    const env = { TOUCHSTONE_API_KEY: admin };
    const json = await cliAsync(
      ['audit', 'list', '--server', base, '--outcome', 'denied', '--json'],
      env,
    );
    expect(json.code, json.stderr).toBe(0);
    const entries = JSON.parse(json.stdout) as { requestId: string; code: string }[];
    expect(entries.find((e) => e.requestId === 'cli-denied')).toMatchObject({
      code: 'PERMISSION_DENIED',
      action: 'DELETE /v1alpha1/policies/:name',
    });
    const text = await cliAsync(['audit', 'list', '--server', base, '--limit', '5'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/denied\s+PERMISSION_DENIED\s+key/);
    expect(text.stdout).not.toContain(admin);
  });

  it('refuses a bad flag as a usage error', async () => {
    const r = await cliAsync(['audit', 'list', '--server', base, '--outcome', 'maybe'], {
      TOUCHSTONE_API_KEY: admin,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--outcome maybe/);
  });
});
