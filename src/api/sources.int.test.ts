import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../../test/support/process.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';

/** The sources resource over REST and the CLI: rules, grants, status, verbs; no secret leaks. */

const SENTINEL = 'sentinel-secret-5f1e9d0c7a';

const source = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: 'touchstone.dev/v1alpha1',
  kind: 'TraceSource',
  metadata: { name, labels: { 'touchstone.dev/project': 'shop' } },
  spec: {
    connector: 'mlflow',
    endpoint: 'http://127.0.0.1:5000',
    locations: ['support-agent'],
    credentials: { env: 'MLFLOW_TOKEN' },
    ...spec,
  },
});

describe('sources over REST', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-sources-api-'));
  const clock = new FakeClock(Date.parse('2026-11-22T10:00:00Z'));
  const logs: string[] = [];
  let app: App;
  let admin: string;
  let owner: string;

  beforeAll(async () => {
    const config = loadConfig({
      env: {},
      overrides: {
        data_dir: dataDir,
        log_level: 'info',
        // Admins here may not create runs, so neither may they apply a scheduled source.
        auth: {
          rules: [
            { effect: 'deny', when: 'action == "runs.create" && "admin" in principal.roles' },
          ],
        },
        sources: { allow_hosts: ['127.0.0.1'] },
        credentials: {
          grants: [{ env: 'MLFLOW_TOKEN', projects: ['shop'], hosts: ['127.0.0.1'] }],
        },
      },
    });
    const sink = new Writable({
      write(chunk, _enc, done) {
        logs.push(String(chunk));
        done();
      },
    });
    app = await createApp(config, {
      env: { MLFLOW_TOKEN: SENTINEL, OTHER_TOKEN: SENTINEL },
      clock,
      processMetrics: false,
      logger: pino({ level: 'info' }, sink),
    });
    admin = (await app.keys.create(OPEN_PRINCIPAL, { project: 'shop', roles: ['admin'] })).secret;
    owner = (await app.keys.create(OPEN_PRINCIPAL, { project: 'other', roles: ['owner'] })).secret;
  });
  afterAll(async () => {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown, key = admin) =>
    app.server.inject({
      method,
      url,
      ...(body === undefined ? {} : { payload: body as object }),
      headers: { authorization: `Bearer ${key}` },
    });

  const SAGEMAKER_ARN = 'arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/t';

  it('refuses what the spec refuses, each with its code and path', async () => {
    const cases: [Record<string, unknown>, number, string, string?][] = [
      [{ variant: 'azureml' }, 400, 'SOURCE_VARIANT_REFUSED'],
      [
        {
          variant: 'databricks',
          endpoint: 'https://x.cloud.databricks.com',
          locations: ['12', 'main.agents'],
        },
        400,
        'SOURCE_LOCATIONS_MIXED',
      ],
      [
        {
          variant: 'databricks',
          endpoint: 'https://x.cloud.databricks.com',
          locations: ['agent-name'],
        },
        400,
        'SOURCE_UNSUPPORTED',
      ],
      [
        {
          variant: 'databricks',
          endpoint: 'https://x.cloud.databricks.com',
          locations: ['main.agents.trace_'],
        },
        400,
        'SOURCE_UNSUPPORTED',
        'spec.locations[0]',
      ],
      [
        {
          variant: 'databricks',
          endpoint: 'https://x.cloud.databricks.com',
          locations: ['main.agents'],
        },
        400,
        'SOURCE_INVALID',
        'spec.auth.databricks.sqlWarehouseId',
      ],
      [
        {
          variant: 'databricks',
          endpoint: 'http://x.cloud.databricks.com',
          locations: ['12'],
          auth: { databricks: { clientId: 'sp' } },
        },
        400,
        'SOURCE_ENDPOINT_REFUSED',
      ],
      [
        { variant: 'sagemaker', endpoint: 'https://x.example.com' },
        400,
        'SOURCE_INVALID',
        'spec.auth.sigv4.arn',
      ],
      [
        {
          variant: 'sagemaker',
          endpoint: 'https://us-east-1.experiments.sagemaker.aws',
          auth: { sigv4: { arn: 'arn:aws:sagemaker:us-east-1:1:mlflow-tracking-server/t' } },
        },
        400,
        'SOURCE_INVALID',
        'spec.auth.sigv4.arn',
      ],
      // The signature goes only to SageMaker's own hosts of the ARN's region, over https.
      ...[
        'https://x.example.com',
        'https://us-west-2.experiments.sagemaker.aws',
        'http://us-east-1.experiments.sagemaker.aws',
        'https://us-east-1.experiments.sagemaker.aws.example.com',
      ].map((endpoint): [Record<string, unknown>, number, string, string] => [
        { variant: 'sagemaker', endpoint, auth: { sigv4: { arn: SAGEMAKER_ARN } } },
        400,
        'SOURCE_ENDPOINT_REFUSED',
        'spec.endpoint',
      ]),
      // Valid managed endpoints whose credential is not granted for their host.
      ...[
        {
          variant: 'sagemaker',
          endpoint: 'https://us-east-1.experiments.sagemaker.aws',
          auth: { sigv4: { arn: SAGEMAKER_ARN } },
        },
        {
          variant: 'sagemaker',
          endpoint: 'https://vpce-0a1b2c-3d4e.experiments.sagemaker.us-east-1.vpce.amazonaws.com',
          auth: { sigv4: { arn: SAGEMAKER_ARN } },
        },
        {
          variant: 'sagemaker',
          endpoint: 'https://mlflow.sagemaker.us-east-1.app.aws',
          auth: { sigv4: { arn: 'arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-1' } },
        },
        { variant: 'databricks', endpoint: 'https://x.cloud.databricks.com', locations: ['12'] },
        {
          variant: 'databricks',
          endpoint: 'https://x.cloud.databricks.com',
          locations: ['main.agents'],
          auth: { databricks: { clientId: 'sp', sqlWarehouseId: 'wh' } },
        },
      ].map((spec): [Record<string, unknown>, number, string] => [
        spec,
        403,
        'CREDENTIAL_NOT_GRANTED',
      ]),
      [{ endpoint: 'http://10.1.2.3:5000' }, 400, 'SOURCE_ENDPOINT_REFUSED'],
      [{ endpoint: 'http://169.254.169.254/latest' }, 400, 'SOURCE_ENDPOINT_REFUSED'],
      [{ maxTraceDuration: '0s' }, 400, 'SOURCE_INVALID', 'spec.maxTraceDuration'],
      [
        { overrides: { reference: 'output.split(' } },
        400,
        'POLICY_CEL_INVALID',
        'spec.overrides.reference',
      ],
      [{ overrides: { nonsense: 'output' } }, 400, 'SOURCE_INVALID', 'spec.overrides.nonsense'],
      [{ policies: ['missing'] }, 404, 'SOURCE_POLICY_NOT_FOUND', 'spec.policies[0]'],
      [{ credentials: { env: 'OTHER_TOKEN' } }, 403, 'CREDENTIAL_NOT_GRANTED'],
      [{ credentials: { file: '../etc/passwd' } }, 400, 'SOURCE_INVALID', 'spec.credentials.file'],
    ];
    for (const [spec, status, code, path] of cases) {
      for (const url of ['/v1alpha1/sources?validate_only=true', '/v1alpha1/sources']) {
        const res = await call('POST', url, source('bad', spec));
        expect({ spec, status: res.statusCode, code: res.json().error.code }).toEqual({
          spec,
          status,
          code,
        });
        if (path !== undefined) {
          expect(res.json().error.details.map((d: { path: string }) => d.path)).toContain(path);
        }
        expect(res.body).not.toContain(SENTINEL);
      }
    }
    expect((await call('GET', '/v1alpha1/sources/bad')).statusCode).toBe(404);
  });

  it('checks a scheduled source as a run of its window: permission, evaluators, judge, gates', async () => {
    const shopOwner = (await app.keys.create(OPEN_PRINCIPAL, { project: 'shop', roles: ['owner'] }))
      .secret;
    const hourly = (runSpec: Record<string, unknown>, schedule = {}) =>
      source('hourly', { schedule: { cron: '0 * * * *', window: '1h', ...schedule }, runSpec });
    const good = hourly({ evaluators: [{ ref: 'tool-errors' }], gates: ['tool-errors >= 0.9'] });
    // sources.write alone is not enough: the source creates runs.
    const denied = await call('POST', '/v1alpha1/sources', good);
    expect(denied.statusCode).toBe(403);
    expect(denied.json().error.message).toContain('runs.create');
    const cases: [Record<string, unknown>, string][] = [
      [hourly({ evaluators: [{ ref: 'no-such-evaluator' }] }), 'spec.runSpec.evaluators[0].ref'],
      [hourly({ evaluators: [{ ref: 'tool-errors' }], judge: 'nope' }), 'spec.runSpec.judge'],
      [
        hourly({ evaluators: [{ ref: 'tool-errors' }], gates: ['helpfulness >= 1'] }),
        'spec.runSpec.gates[0]',
      ],
      [
        hourly({
          evaluators: [{ ref: 'tool-errors' }],
          target: { http: { url: 'https://a.example.com' } },
        }),
        'spec.runSpec.target',
      ],
      [
        hourly({ evaluators: [{ ref: 'tool-errors' }] }, { cron: '0 0 * * * *' }),
        'spec.schedule.cron',
      ],
      [hourly({ evaluators: [{ ref: 'tool-errors' }] }, { window: 0 }), 'spec.schedule.window'],
    ];
    for (const [body, path] of cases) {
      const res = await call('POST', '/v1alpha1/sources?validate_only=true', body, shopOwner);
      expect({ path, status: res.statusCode, code: res.json().error.code }).toEqual({
        path,
        status: 400,
        code: 'SOURCE_INVALID',
      });
      expect(res.json().error.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    const applied = await call('POST', '/v1alpha1/sources', good, shopOwner);
    expect(applied.statusCode).toBe(200);
    expect(applied.json().status).toMatchObject({ missedWindows: 0 });
    expect(
      (await call('DELETE', '/v1alpha1/sources/hourly', undefined, shopOwner)).statusCode,
    ).toBe(200);
  });

  it('applies, shows status, pauses, resumes, backfills and deletes; the credential never shows', async () => {
    const dry = await call('POST', '/v1alpha1/sources?validate_only=true', source('feed'));
    expect(dry.statusCode).toBe(200);
    expect((await call('GET', '/v1alpha1/sources/feed')).statusCode).toBe(404);

    const applied = await call(
      'POST',
      '/v1alpha1/sources',
      source('feed', { backfill: { since: '24h' } }),
    );
    expect(applied.statusCode).toBe(200);
    expect(applied.json()).toMatchObject({
      created: true,
      metadata: { name: 'feed', generation: 1 },
      spec: { backfill: { since: '24h' } },
      status: {
        phase: 'backfilling',
        lagSeconds: null,
        pulled: 0,
        scored: 0,
        deferred: 0,
        watermark: '2026-11-21T10:00:00.000Z',
      },
    });
    // What get prints applies again unchanged.
    const got = (await call('GET', '/v1alpha1/sources/feed')).json();
    expect((await call('POST', '/v1alpha1/sources', got)).json()).toMatchObject({
      created: false,
      metadata: { generation: 1 },
    });

    expect((await call('POST', '/v1alpha1/sources/feed:pause')).json().status.phase).toBe('paused');
    expect((await call('POST', '/v1alpha1/sources/feed:resume')).json().status.phase).toBe(
      'backfilling',
    );
    const back = await call('POST', '/v1alpha1/sources/feed:backfill', {
      since: '2026-11-01T00:00:00Z',
    });
    expect(back.json().status).toMatchObject({
      phase: 'backfilling',
      watermark: '2026-11-01T00:00:00.000Z',
    });
    expect(
      (await call('POST', '/v1alpha1/sources/feed:backfill', { since: 'last week' })).statusCode,
    ).toBe(400);

    const list = (await call('GET', '/v1alpha1/sources')).json();
    expect(list.sources.map((s: { metadata: { name: string } }) => s.metadata.name)).toEqual([
      'feed',
    ]);
    // Another project's owner sees nothing of it.
    expect(
      (await call('GET', '/v1alpha1/sources/feed?project=shop', undefined, owner)).statusCode,
    ).toBe(403);

    expect((await call('DELETE', '/v1alpha1/sources/feed')).statusCode).toBe(200);
    expect((await call('GET', '/v1alpha1/sources/feed')).statusCode).toBe(404);
    for (const body of [
      dry.body,
      applied.body,
      JSON.stringify(got),
      JSON.stringify(list),
      ...logs,
    ]) {
      expect(body).not.toContain(SENTINEL);
    }
    expect(logs.join('')).toContain('"action":"sources.apply"');
  });
});

describe('touchstone source (CLI, local data dir)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-source-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const data = join(dir, 'data');
  const config = join(dir, 'config.yaml');

  it('dry-runs with grants, applies, lists with status columns, pauses and gets', () => {
    writeFileSync(
      config,
      'sources: {allow_hosts: ["127.0.0.1"]}\ncredentials: {grants: [{env: MLFLOW_TOKEN, projects: [default], hosts: ["127.0.0.1"]}]}\n',
    );
    const file = join(dir, 'source.yaml');
    writeFileSync(
      file,
      'apiVersion: touchstone.dev/v1alpha1\nkind: TraceSource\nmetadata: {name: feed}\nspec:\n  connector: mlflow\n  endpoint: http://127.0.0.1:5000\n  locations: [agent]\n  credentials: {env: MLFLOW_TOKEN}\n',
    );
    const base = ['--data-dir', data, '--config', config];
    const env = { MLFLOW_TOKEN: SENTINEL };
    const ungranted = join(dir, 'ungranted.yaml');
    writeFileSync(ungranted, 'sources: {allow_hosts: ["127.0.0.1"]}\n');
    const refused = cli(
      ['source', 'apply', '-f', file, '--dry-run', '--data-dir', data, '--config', ungranted],
      env,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('credentials.grants');
    expect(refused.stderr).not.toContain(SENTINEL);

    expect(cli(['source', 'apply', '-f', file, '--dry-run', ...base], env).stdout).toContain(
      'valid: source feed',
    );
    expect(cli(['source', 'apply', '-f', file, ...base], env).stdout).toContain(
      'created: source feed (project default)',
    );
    const list = cli(['source', 'list', ...base], env).stdout;
    expect(list).toMatch(/SOURCE\s+CONNECTOR\s+PHASE\s+LAG\s+PULLED\s+SCORED\s+LAST ERROR/);
    expect(list).toMatch(/default\/feed\s+mlflow\s+tailing\s+-\s+0\s+0/);
    expect(cli(['source', 'pause', 'feed', ...base], env).stdout).toContain(
      'paused source feed: phase paused',
    );
    const got = JSON.parse(cli(['source', 'get', 'feed', ...base], env).stdout);
    expect(got.status.phase).toBe('paused');
    expect(JSON.stringify(got)).not.toContain(SENTINEL);

    // A scheduled source's run spec is checked on the data dir too, against this build's evaluators.
    const hourly = join(dir, 'hourly.yaml');
    const scheduled = (ref: string) =>
      `apiVersion: touchstone.dev/v1alpha1\nkind: TraceSource\nmetadata: {name: hourly}\nspec:\n  connector: mlflow\n  endpoint: http://127.0.0.1:5000\n  locations: [agent]\n  schedule: {cron: "0 * * * *", window: 1h}\n  runSpec: {evaluators: [{ref: ${ref}}]}\n`;
    writeFileSync(hourly, scheduled('no-such-evaluator'));
    const unknown = cli(['source', 'apply', '-f', hourly, '--dry-run', ...base], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('spec.runSpec.evaluators[0].ref');
    writeFileSync(hourly, scheduled('tool-errors'));
    expect(cli(['source', 'apply', '-f', hourly, '--dry-run', ...base], env).stdout).toContain(
      'valid: source hourly',
    );
  }, 180_000);
});
