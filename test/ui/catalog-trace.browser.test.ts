import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DatabricksFake } from '../fakes/databricks/server.js';
import {
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
  openBrowser,
  unexpected,
  type WatchedPage,
  watchedPage,
} from './browser.js';
import { api } from './data.js';

/**
 * A trace pulled from a Databricks Unity Catalog schema has the id `catalog.schema/<id>`, with a
 * slash: the traces list links to it and its page opens, in Chromium against a real
 * `touchstone serve` pulling from the contract fake workspace.
 */

const SCHEMA = 'main.agents';

describeBrowser('a Unity Catalog trace in the web UI', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-ui-catalog-'));
  let base = '';
  let fake: DatabricksFake;
  let server: ServerProcess;
  let browser: Browser;
  let tab: WatchedPage;
  let traceId = '';

  beforeAll(async () => {
    const [ui, workspace] = await Promise.all([buildUi(), DatabricksFake.start()]);
    fake = workspace;
    fake.store.add(SCHEMA, Date.now() - 60 * 60_000);
    const port = await freePort();
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        'sources: {allow_hosts: ["127.0.0.1"]}',
        'credentials: {grants: [{env: DATABRICKS_TOKEN, projects: [default], hosts: ["127.0.0.1"]}]}',
        `ui: ${JSON.stringify({ assets_dir: ui })}`,
        '',
      ].join('\n'),
    );
    server = await startServer(serveArgs(join(dir, 'data'), port, join(dir, 'config.yaml')), {
      DATABRICKS_TOKEN: fake.pat,
    });
    base = `http://127.0.0.1:${port}`;
    await api(base, undefined, 'POST', '/v1alpha1/sources', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: 'catalog' },
      spec: {
        connector: 'mlflow',
        variant: 'databricks',
        endpoint: fake.url,
        locations: [SCHEMA],
        credentials: { env: 'DATABRICKS_TOKEN' },
        auth: { databricks: { sqlWarehouseId: fake.sqlWarehouseId } },
        backfill: { since: '2h' },
      },
    });
    traceId = await eventually(async () => {
      const list = await api<{ traces: { traceId: string }[] }>(
        base,
        undefined,
        'GET',
        '/v1alpha1/traces',
      );
      return list.traces[0]?.traceId;
    }, 60_000);
    browser = await openBrowser();
    tab = await watchedPage(browser.context);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    server?.proc.kill('SIGKILL');
    expect(fake?.violations ?? []).toEqual([]);
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the trace and opens its page by its catalog.schema/<id> id', async () => {
    expect(traceId).toMatch(/^main\.agents\/[0-9a-f]{32}$/);
    const { page } = tab;
    await page.goto(`${base}/ui/traces`);
    await page
      .getByRole('link', { name: /answer/ })
      .first()
      .click();
    await page.getByRole('heading', { level: 1 }).waitFor();
    expect(decodeURIComponent(new URL(page.url()).pathname)).toBe(`/ui/traces/${traceId}`);
    await expect.poll(() => page.title()).toContain(traceId);
    expect(await page.getByText('not found', { exact: false }).count()).toBe(0);
    expect(unexpected(tab.problems)).toEqual([]);
  });
});
