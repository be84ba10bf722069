import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TestReceiver } from '../../src/webhooks/receiver.testkit.js';
import { agentRun } from '../fakes/langfuse/samples.js';
import { LangfuseFake } from '../fakes/langfuse/server.js';
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
 * The web UI end to end in Debian's Chromium against a real `touchstone serve` with auth, real
 * data and every surface the UI reads: OTLP traces from the OpenTelemetry SDK, a policy with an
 * alert, a Langfuse source pulling from the contract fake, a run with a failed gate, a webhook
 * whose deliveries fail, a dataset. It signs in with a key, filters traces by label, opens a
 * trace with a failing tool call and reads the model's messages, the scores chart, the sources
 * list, the run with its failed gate and the records that failed it; it annotates a trace and
 * finds the annotation in the REST API and at a webhook receiver. Every page passes axe-core
 * (no serious or critical violation), breaks no Content-Security-Policy rule, shows no secret,
 * and is kept as a screenshot in test-results/ui/.
 */

const PROJECT = 'shop';
const FAIL_MESSAGE = 'weather service timed out after 5000 ms';
const QUESTION = 'Will it rain in Lisbon tomorrow?';
/** An annotation comment that would run script if the page rendered it as HTML. */
const HOSTILE_COMMENT = 'tool timed out <img src=x onerror="window.__annotated=1">';

describeBrowser('the web UI, end to end', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-ui-e2e-'));
  const data = join(dir, 'data');
  let base = '';
  let server: ServerProcess;
  let langfuse: LangfuseFake;
  let browser: Browser;
  let tab: WatchedPage;
  let owner = '';
  let runId = '';
  let webhookSecret = '';
  let receiver: TestReceiver;
  const refund: string[] = [];

  beforeAll(async () => {
    const [ui, fake] = await Promise.all([buildUi(), LangfuseFake.start()]);
    langfuse = fake;
    langfuse.add(
      ...agentRun(1, Date.now() - 50 * 60_000),
      ...agentRun(2, Date.now() - 40 * 60_000, { error: true }),
    );
    owner = createKey(data, PROJECT, 'owner');
    const ingest = createKey(data, PROJECT, 'ingest');
    const port = await freePort();
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        'auth: {}',
        'traces: {completion_grace: 200ms}',
        `ui: {assets_dir: ${JSON.stringify(ui)}}`,
        'sources: {allow_hosts: ["127.0.0.1"]}',
        'webhooks: {allow_hosts: ["127.0.0.1"]}',
        'credentials: {grants: [{env: LANGFUSE_KEYS, projects: ["shop"], hosts: ["127.0.0.1"]}]}',
        '',
      ].join('\n'),
    );
    server = await startServer(serveArgs(data, port, join(dir, 'config.yaml')), {
      LANGFUSE_KEYS: langfuse.credential,
    });
    base = `http://127.0.0.1:${port}`;

    await api(base, owner, 'POST', '/v1alpha1/policies', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'quality' },
      spec: {
        stages: [{ evaluators: [{ ref: 'tool-errors' }, { ref: 'step-budget' }], window: '1h' }],
        // tool-errors is the failed share of tool calls: healthy traffic keeps it below 0.5.
        alerts: [{ metric: 'tool-errors', below: 0.5, minSamples: 2 }],
      },
    });
    const hook = await api<{ secret: string }>(base, owner, 'POST', '/v1alpha1/webhooks', {
      name: 'ci',
      url: `http://127.0.0.1:${await freePort()}/hook`,
      events: ['WEBHOOK_EVENT_RUN_FINISHED'],
    });
    webhookSecret = hook.secret;
    receiver = await TestReceiver.start();
    const scoredHook = await api<{ secret: string }>(base, owner, 'POST', '/v1alpha1/webhooks', {
      name: 'scored',
      url: receiver.url,
      events: ['WEBHOOK_EVENT_TRACE_SCORED'],
    });
    receiver.secret = scoredHook.secret;
    const spans = recordSpans(
      { 'service.name': 'weather-agent', 'touchstone.label.workflow': 'refund' },
      (tracer) => {
        refund.push(
          weatherRun(tracer, { question: QUESTION, city: 'Lisbon', toolError: FAIL_MESSAGE }),
        );
      },
    );
    spans.push(
      ...recordSpans(
        { 'service.name': 'weather-agent', 'touchstone.label.workflow': 'forecast' },
        (tracer) => {
          for (const city of ['Paris', 'Oslo', 'Rome'])
            weatherRun(tracer, { question: `Weather in ${city}?`, city });
        },
      ),
    );
    await sendSpans(base, ingest, spans);
    await api(base, owner, 'POST', '/v1alpha1/sources', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: 'prod-langfuse' },
      spec: {
        connector: 'langfuse',
        endpoint: langfuse.url,
        locations: ['production'],
        credentials: { env: 'LANGFUSE_KEYS' },
        backfill: { since: '2h' },
        poll: { interval: '5s' },
      },
    });
    const run = await api<{ id: string }>(base, owner, 'POST', '/v1alpha1/runs', {
      name: 'capitals-nightly',
      dataset: {
        records: [
          { id: 'fr', input: 'Capital of France?', output: 'Paris', reference: 'Paris' },
          { id: 'it', input: 'Capital of Italy?', output: 'Milan', reference: 'Rome' },
          { id: 'es', input: 'Capital of Spain?', output: 'Madrid', reference: 'Madrid' },
        ],
      },
      evaluators: [{ ref: 'exact-match' }],
      gates: ['exact-match >= 0.9'],
    });
    runId = run.id;
    const upload = await fetch(`${base}/v1alpha1/datasets/capitals/upload?format=jsonl`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/jsonl' },
      body: '{"id":"fr","input":"Capital of France?","reference":"Paris"}\n{"id":"it","input":"Capital of Italy?","reference":"Rome"}\n',
    });
    expect(upload.status).toBe(200);

    // Everything has happened: traces scored, the source pulled, the run finished.
    await eventually(async () => {
      const scored = await api<{ entries: unknown[] }>(
        base,
        owner,
        'GET',
        '/v1alpha1/scores?policy=quality',
      );
      const sources = await api<{ sources: { status: { pulled: number } }[] }>(
        base,
        owner,
        'GET',
        '/v1alpha1/sources',
      );
      const r = await api<{ status: string }>(
        base,
        owner,
        'GET',
        `/v1alpha1/runs/${runId}?view=basic`,
      );
      return scored.entries.length >= 4 &&
        (sources.sources[0]?.status.pulled ?? 0) >= 2 &&
        r.status === 'RUN_STATUS_FAILED'
        ? true
        : undefined;
    }, 60_000);

    browser = await openBrowser();
    tab = await watchedPage(browser.context);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    server?.proc.kill('SIGKILL');
    await langfuse?.close();
    await receiver?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** What every page must hold to: no secret on it, accessible, kept as a screenshot. */
  async function check(page: Page, name: string): Promise<void> {
    const html = await page.content();
    for (const secret of [owner, webhookSecret, receiver.secret, langfuse.secretKey])
      expect(html).not.toContain(secret);
    await expectAccessible(page, name);
    await screenshot(page, name);
  }

  it('asks for an API key once, keeps it in the tab only, and shows what the key reads', async () => {
    const { page } = tab;
    await page.goto(`${base}/ui/`);
    await page.getByRole('heading', { name: 'Enter an API key' }).waitFor();
    await check(page, 'key-prompt');
    await page.getByLabel('API key').fill(owner);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.getByRole('heading', { name: 'Traces' }).waitFor();
    expect(page.url()).toBe(`${base}/ui/traces?project=${PROJECT}`);
    await expect.poll(() => page.locator('header').textContent()).toContain('owner');
    expect(await page.locator('#project').textContent()).toBe(PROJECT);
    const storage = await page.evaluate(
      '({ session: sessionStorage.length, local: localStorage.length })',
    );
    expect(storage).toEqual({ session: 1, local: 0 });
  });

  it('lists traces newest first with their scores, and filters them by label (a deep link)', async () => {
    const { page } = tab;
    const rows = page.locator('table.traces tbody tr');
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBeGreaterThanOrEqual(6);
    await expect.poll(() => page.locator('table.traces').textContent()).toContain('tool-errors');
    await check(page, 'traces');

    await page.getByLabel('Labels', { exact: true }).fill('workflow=refund');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await expect.poll(() => rows.count()).toBe(1);
    expect(page.url()).toContain('labels=workflow%3Drefund');
    await page.reload();
    await expect.poll(() => rows.count()).toBe(1);
    expect(await page.getByLabel('Labels', { exact: true }).inputValue()).toBe('workflow=refund');
    expect(await rows.first().textContent()).toContain('workflow=refund');
  });

  it('opens a trace whose tool call failed: the failing call, its error and the model’s messages', async () => {
    const { page } = tab;
    await page.locator('table.traces tbody tr').first().getByRole('link').click();
    await page.waitForURL(`**/ui/traces/${refund[0]}?project=${PROJECT}`);
    const steps = page.getByRole('listbox', { name: /Steps of the trace/ });
    await steps.waitFor();
    // The first failing step is shown first.
    const selected = page.getByRole('option', { selected: true });
    await expect.poll(() => selected.textContent()).toContain('get_weather');
    const detail = page.locator('.step-detail');
    expect(await detail.locator('.step-error').textContent()).toContain(FAIL_MESSAGE);
    expect(await detail.textContent()).toContain('Lisbon');

    await page.getByRole('option', { name: /chat gpt-4o-mini/ }).click();
    const chat = detail.getByRole('list', { name: 'input messages' });
    expect(await chat.textContent()).toContain(QUESTION);
    expect(await detail.getByRole('list', { name: 'output messages' }).textContent()).toContain(
      'get_weather',
    );
    expect(await detail.textContent()).toContain('gpt-4o-mini');
    await expect
      .poll(() => page.locator('table.results').first().textContent())
      .toContain('tool-errors');
    await check(page, 'trace');

    // The keyboard moves through the steps.
    await steps.focus();
    await page.keyboard.press('End');
    await expect.poll(() => selected.textContent()).toContain('get_weather');

    // A reload opens the same view.
    await page.reload();
    await expect
      .poll(() => page.getByRole('option', { selected: true }).textContent())
      .toContain('get_weather');
  });

  it('annotates the trace: the score shows on the page, in the REST API and at a webhook receiver', async () => {
    const { page } = tab;
    await page.goto(`${base}/ui/traces/${refund[0]}?project=${PROJECT}`);
    const form = page.getByRole('form', { name: 'Annotate this trace' });
    await form.waitFor();
    await form.getByLabel('Name').fill('answer-correct');
    await form.getByLabel('Pass or fail').check();
    await form.getByLabel('Verdict').selectOption('false');
    await form.getByLabel('Comment (optional)').fill(HOSTILE_COMMENT);
    await form.getByRole('button', { name: 'Save annotation' }).click();
    await expect
      .poll(() => form.getByRole('status').textContent())
      .toContain('Saved answer-correct');
    const human = page.locator('table.results', { hasText: 'Human annotations' });
    await expect.poll(() => human.textContent()).toContain('answer-correct');
    // The comment is shown as the text it is, never as markup.
    expect(await human.textContent()).toContain(HOSTILE_COMMENT);
    expect(await human.locator('img').count()).toBe(0);
    expect(await page.evaluate('window.__annotated')).toBeUndefined();
    await check(page, 'annotated');

    const { keyId } = await api<{ keyId: string }>(base, owner, 'GET', '/v1alpha1/whoami');
    const expected = {
      evaluator: 'answer-correct',
      outcome: 'OUTCOME_SCORED',
      scores: [{ name: 'answer-correct', passed: false, explanation: HOSTILE_COMMENT }],
      annotator: { kind: 'human', principal: keyId },
    };
    const scores = await api<{ results: Record<string, unknown[]> }>(
      base,
      owner,
      'GET',
      `/v1alpha1/traces/${refund[0]}/scores?project=${PROJECT}`,
    );
    expect(scores.results['@human']).toEqual([expect.objectContaining(expected)]);

    const delivered = await eventually(async () => {
      const found = receiver.received.find(
        (r) => r.event === 'trace.scored' && JSON.parse(r.body).policy === '@human',
      );
      return found;
    }, 20_000);
    expect(delivered.verified).toBe(true);
    expect(JSON.parse(delivered.body)).toMatchObject({
      type: 'trace.scored',
      project: PROJECT,
      policy: '@human',
      trace: { traceId: refund[0] },
      results: [expected],
    });
  });

  it('charts each policy metric over time with its threshold, counts and alert markers', async () => {
    const { page } = tab;
    await page
      .getByRole('navigation', { name: 'Sections' })
      .getByRole('link', { name: 'Scores' })
      .click();
    const figure = page.locator('figure.series', { hasText: 'quality · tool-errors' });
    await figure.waitFor();
    expect(await figure.locator('svg line.threshold').count()).toBe(1);
    expect(await figure.locator('svg .window-line, svg .window-dot').count()).toBe(1);
    expect(await figure.locator('svg rect.count-bar').count()).toBeGreaterThanOrEqual(1);
    expect(await figure.textContent()).toContain('alert below 0.5');
    expect(await page.locator('svg .marker').count()).toBeGreaterThanOrEqual(1);
    await check(page, 'scores');
  });

  it('shows the sources list view live, and a source with its status', async () => {
    const { page } = tab;
    await page.goto(`${base}/ui/sources?project=${PROJECT}`);
    const row = page.locator('tr', { hasText: `${PROJECT}/prod-langfuse` });
    await row.waitFor();
    const text = (await row.textContent()) ?? '';
    expect(text).toContain('langfuse');
    expect(text).toMatch(/backfilling|tailing/);
    await check(page, 'sources');
    await row.getByRole('link').click();
    await page.getByRole('heading', { name: 'Status' }).waitFor();
    expect(await page.locator('dl.facts').textContent()).toContain('Watermark');
    await check(page, 'source');
  });

  it('shows a run with its failed gate, value against the minimum, and the records that failed it', async () => {
    const { page } = tab;
    await page.goto(`${base}/ui/runs?project=${PROJECT}`);
    await page.locator('tr', { hasText: 'capitals-nightly' }).getByRole('link').click();
    const gate = page.locator('tr', { hasText: 'exact-match ≥ 0.9' });
    await gate.waitFor();
    expect(await gate.textContent()).toMatch(/fail.*0\.667 vs min 0\.9/);
    await check(page, 'runs');
    await gate.getByRole('link', { name: 'records that failed it' }).click();
    await expect.poll(() => page.locator('details.run-item').count()).toBe(1);
    const failed = page.locator('details.run-item');
    expect(await failed.textContent()).toContain('Milan');
    expect(await failed.textContent()).toContain('exact-match: fail');
    await check(page, 'run');
  });

  it('shows policies with alert states, datasets with a preview, webhooks and their deliveries', async () => {
    const { page } = tab;
    await page.goto(`${base}/ui/policies/quality?project=${PROJECT}`);
    await page.getByRole('heading', { name: 'Alerts' }).waitFor();
    expect(await page.locator('table').first().textContent()).toContain('tool-errors');
    await check(page, 'policy');

    await page.goto(`${base}/ui/datasets?project=${PROJECT}`);
    await page.getByRole('link', { name: 'capitals' }).click();
    await expect
      .poll(() => page.locator('table.records').textContent())
      .toContain('Capital of Italy?');
    await check(page, 'dataset');

    await page.goto(`${base}/ui/webhooks?project=${PROJECT}`);
    const hook = page.locator('tr', { hasText: 'ci' });
    await hook.waitFor();
    expect(await hook.textContent()).toContain('set');
    await check(page, 'webhooks');
    await hook.getByRole('link').click();
    await expect
      .poll(() => page.locator('table').textContent(), { timeout: 20_000 })
      .toContain('run.finished');
    await check(page, 'webhook');
  });

  it('broke no Content-Security-Policy rule and logged no error on any page', () => {
    expect(unexpected(tab.problems)).toEqual([]);
  });
});
