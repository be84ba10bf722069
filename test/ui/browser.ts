import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';

/**
 * Driving Debian's Chromium (never a downloaded browser) with playwright-core for the web UI's
 * browser tests: the UI built once per test process into a temp dir (the server serves it with
 * `ui.assets_dir`), a fresh profile per browser, every page's console errors, uncaught errors
 * and Content-Security-Policy violations collected, axe-core run on every page, screenshots kept
 * under test-results/ui/.
 */

/** `.ci/run` installs Debian's chromium and exports its path here. */
export const CHROMIUM = process.env.TOUCHSTONE_CHROMIUM ?? '/usr/bin/chromium';
export const HAVE_CHROMIUM = existsSync(CHROMIUM);
const SKIP_REASON = `no Chromium at ${CHROMIUM} (apt-get install chromium, or set TOUCHSTONE_CHROMIUM)`;

/** Tests that need the browser: skipped without it, except under CI=true where that fails. */
export function describeBrowser(name: string, body: () => void): void {
  if (!HAVE_CHROMIUM) {
    describe(name, () => {
      if (process.env.CI === 'true') {
        it('needs Chromium under CI', () => {
          throw new Error(SKIP_REASON);
        });
      } else it.skip(`skipped: ${SKIP_REASON}`, () => {});
    });
    return;
  }
  describe(name, body);
}

export const SCREENSHOTS = resolve('test-results', 'ui');

let built: Promise<string> | undefined;

/** Builds the UI from ui/ (once per process) into a temp dir; returns the dir. */
export function buildUi(): Promise<string> {
  built ??= (async () => {
    const { build } = await import('vite');
    const outDir = mkdtempSync(join(tmpdir(), 'touchstone-ui-dist-'));
    await build({
      configFile: resolve('ui', 'vite.config.ts'),
      build: { outDir, emptyOutDir: true },
      logLevel: 'error',
    });
    return outDir;
  })();
  return built;
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function openBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'touchstone-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1400, height: 900 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface WatchedPage {
  page: Page;
  /** Console errors, uncaught exceptions and CSP violations, as text. */
  problems: string[];
}

/** A new tab whose console errors, page errors and CSP violations are collected. */
export async function watchedPage(context: BrowserContext): Promise<WatchedPage> {
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  await page.exposeFunction('__reportCsp', (text: string) => problems.push(`CSP: ${text}`));
  // Runs in the page before its own scripts (a string: the test's TypeScript has no DOM types).
  await page.addInitScript(`document.addEventListener('securitypolicyviolation', (e) =>
    window.__reportCsp(e.violatedDirective + ' blocked ' + e.blockedURI))`);
  return { page, problems };
}

/** Console errors the server's own refusals cause (a 401/403/404 the page shows in words). */
export function unexpected(problems: readonly string[]): string[] {
  return problems.filter(
    (p) => !/Failed to load resource: the server responded with a status of (401|403|404)/.test(p),
  );
}

const AXE_SOURCE = readFileSync(
  createRequire(import.meta.url).resolve('axe-core/axe.min.js'),
  'utf8',
);

interface AxeViolation {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/** Runs axe-core on the page; fails on serious or critical violations, naming them. */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate<AxeViolation[]>(`axe.run().then((result) =>
    result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.slice(0, 3).map((n) => JSON.stringify(n.target)),
    })))`);
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad, `axe on ${what}: ${JSON.stringify(bad, null, 1)}`).toEqual([]);
}

/** Saves a full-page screenshot as test-results/ui/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
