import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestProvider, type TestProvider } from '../support/oidc-provider.js';
import {
  createKey,
  eventually,
  freePort,
  type ServerProcess,
  serveArgs,
  startServer,
} from '../support/process.js';
import {
  type Browser,
  buildUi,
  describeBrowser,
  expectAccessible,
  openBrowser,
  screenshot,
  unexpected,
  type WatchedPage,
  watchedPage,
} from './browser.js';
import { api, recordSpans, sendSpans, weatherRun } from './data.js';

/**
 * Signing in to the web UI at an identity provider, in Debian's Chromium against a real
 * `touchstone serve` and a real OIDC provider (`oidc-provider`): the page runs the authorization
 * code flow with PKCE, the person signs in on the provider's own page, comes back to the page
 * they asked for, browses a trace and annotates it as themselves (the annotation names their
 * OIDC subject). A forged answer (state mismatch) is refused, an expired sign-in sends the tab
 * back to the sign-in page, and "Sign out" forgets the token. No CSP violation, no console error.
 */

const PROJECT = 'shop';
const CLIENT = 'touchstone-ui';
const QUESTION = 'Will it rain in Porto tomorrow?';

describeBrowser('signing in to the web UI at an identity provider', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-ui-sign-in-'));
  const data = join(dir, 'data');
  let base = '';
  let idp: TestProvider;
  let server: ServerProcess;
  let browser: Browser;
  let tab: WatchedPage;
  let owner = '';
  const traces: string[] = [];

  beforeAll(async () => {
    const [ui, provider] = await Promise.all([
      buildUi(),
      startTestProvider([{ id: CLIENT, claims: {}, redirectUris: ['http://127.0.0.1/ui/'] }], {
        accounts: { ana: { email: 'ana@example.com', groups: ['team-agents'] } },
      }),
    ]);
    idp = provider;
    owner = createKey(data, PROJECT, 'owner');
    const ingest = createKey(data, PROJECT, 'ingest');
    const port = await freePort();
    const oidc = {
      issuer: idp.issuer,
      audiences: [CLIENT],
      mappings: [{ groups: ['team-agents'], project: PROJECT, roles: ['editor'] }],
    };
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        `auth: ${JSON.stringify({ allow_hosts: ['127.0.0.1'], oidc: [oidc] })}`,
        'traces: {completion_grace: 200ms}',
        `ui: ${JSON.stringify({
          assets_dir: ui,
          sign_in: { issuer: idp.issuer, client_id: CLIENT, scopes: ['openid', 'email', 'groups'] },
        })}`,
        '',
      ].join('\n'),
    );
    server = await startServer(serveArgs(data, port, join(dir, 'config.yaml')));
    base = `http://127.0.0.1:${port}`;
    const spans = recordSpans({ 'service.name': 'weather-agent' }, (tracer) => {
      traces.push(weatherRun(tracer, { question: QUESTION, city: 'Porto' }));
    });
    await sendSpans(base, ingest, spans);
    await eventually(async () => {
      const list = await api<{ traces: unknown[] }>(
        base,
        owner,
        'GET',
        `/v1alpha1/traces?project=${PROJECT}`,
      );
      return list.traces.length >= 1 ? true : undefined;
    }, 30_000);
    browser = await openBrowser();
    tab = await watchedPage(browser.context);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    server?.proc.kill('SIGKILL');
    await idp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const signInButton = (page: Page) =>
    page.getByRole('button', { name: `Sign in with ${new URL(idp.issuer).host}` });

  it('shows the sign-in page instead of the key prompt, signs in at the provider with PKCE and comes back to the page asked for', async () => {
    const { page } = tab;
    const asked = `${base}/ui/traces?project=${PROJECT}`;
    await page.goto(asked);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await page.getByLabel('API key').count()).toBe(0);
    await expectAccessible(page, 'sign-in');
    await screenshot(page, 'sign-in');

    let authorize: URL | undefined;
    page.on('request', (req) => {
      if (req.url().startsWith(`${idp.issuer}/auth`)) authorize ??= new URL(req.url());
    });
    await signInButton(page).click();
    await page.locator('#login').fill('ana');
    await page.locator('#sign-in').click();
    await page.getByRole('heading', { name: 'Traces' }).waitFor();
    expect(page.url()).toBe(asked);

    const sent = Object.fromEntries(authorize?.searchParams ?? []);
    expect(sent).toMatchObject({
      client_id: CLIENT,
      response_type: 'code',
      scope: 'openid email groups',
      redirect_uri: `${base}/ui/`,
      code_challenge_method: 'S256',
    });
    for (const name of ['state', 'nonce', 'code_challenge']) {
      expect(sent[name], name).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
    await expect.poll(() => page.locator('header').textContent()).toContain('ana@example.com');
    expect(await page.locator('header').textContent()).toContain('editor');
    // The token only, in this tab: the sign-in's verifier, state and nonce are gone.
    const storage = await page.evaluate(
      '({ keys: Object.keys(sessionStorage), local: localStorage.length })',
    );
    expect(storage).toEqual({ keys: ['touchstone.idToken'], local: 0 });
  });

  it('browses a trace and annotates it: the annotation records the OIDC subject', async () => {
    const { page } = tab;
    const rows = page.locator('table.traces tbody tr');
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(1);
    await rows.first().getByRole('link').click();
    await page.waitForURL(`**/ui/traces/${traces[0]}?project=${PROJECT}`);
    await page.getByRole('option', { name: /chat gpt-4o-mini/ }).click();
    expect(
      await page
        .locator('.step-detail')
        .getByRole('list', { name: 'input messages' })
        .textContent(),
    ).toContain(QUESTION);

    const form = page.getByRole('form', { name: 'Annotate this trace' });
    await form.getByLabel('Name').fill('helpful');
    await form.getByLabel('Pass or fail').check();
    await form.getByLabel('Verdict').selectOption('true');
    await form.getByRole('button', { name: 'Save annotation' }).click();
    await expect.poll(() => form.getByRole('status').textContent()).toContain('Saved helpful');
    await expectAccessible(page, 'signed-in trace');
    await screenshot(page, 'signed-in-annotated');

    const scores = await api<{ results: Record<string, unknown[]> }>(
      base,
      owner,
      'GET',
      `/v1alpha1/traces/${traces[0]}/scores?project=${PROJECT}`,
    );
    expect(scores.results['@human']).toEqual([
      expect.objectContaining({
        evaluator: 'helpful',
        scores: [expect.objectContaining({ name: 'helpful', passed: true })],
        annotator: { kind: 'human', principal: `oidc:${idp.issuer}#ana` },
      }),
    ]);
  });

  it('goes back to the sign-in page when the token expires (there is no refresh)', async () => {
    const { page } = tab;
    // The provider's tokens live 10 minutes: bring this one's end near.
    await page.evaluate(`(() => {
      const t = JSON.parse(sessionStorage.getItem('touchstone.idToken'));
      sessionStorage.setItem('touchstone.idToken',
        JSON.stringify({ ...t, expiresAt: Date.now() + 3000 }));
    })()`);
    await page.reload();
    await expect.poll(() => page.locator('header').textContent()).toContain('ana@example.com');
    const expired = page.getByRole('alert').filter({ hasText: 'Your sign-in has expired' });
    await expired.waitFor({ timeout: 15_000 });
    await signInButton(page).waitFor();
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    // Signing in again returns to the same trace.
    await signInButton(page).click();
    await page.locator('#login').fill('ana');
    await page.locator('#sign-in').click();
    await page.waitForURL(`**/ui/traces/${traces[0]}?project=${PROJECT}`);
    await expect.poll(() => page.locator('header').textContent()).toContain('ana@example.com');
  });

  it('signs out: the token is forgotten and the sign-in page is back', async () => {
    const { page } = tab;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signInButton(page).waitFor();
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
  });

  it('refuses an answer whose state does not match the sign-in this tab started', async () => {
    const { page } = tab;
    const exchanges: string[] = [];
    page.on('request', (req) => {
      if (req.url().endsWith('/ui/login/token')) exchanges.push(req.url());
    });
    await page.goto(`${base}/ui/`);
    await signInButton(page).click();
    await page.locator('#login').waitFor();
    // A forged answer instead of the provider's (a link someone else sent).
    await page.goto(`${base}/ui/?code=forged-code&state=forged-state`);
    const alert = page.getByRole('alert').filter({ hasText: 'state does not match' });
    await alert.waitFor();
    expect(page.url()).toBe(`${base}/ui/`);
    await signInButton(page).waitFor();
    // The same answer without any sign-in under way is refused too.
    await page.goto(`${base}/ui/?code=forged-code&state=forged-state`);
    await alert.waitFor();
    expect(exchanges).toEqual([]);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    await expectAccessible(page, 'sign-in refused');
    await screenshot(page, 'sign-in-state-mismatch');
  });

  it('broke no Content-Security-Policy rule and logged no error', () => {
    expect(unexpected(tab.problems)).toEqual([]);
  });
});
