import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import {
  API_AUDIENCE,
  startTestProvider,
  type TestProvider,
} from '../../test/support/oidc-provider.js';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';

/** `auth.rules` on the REST, Connect and OTLP doors, for API keys and provider tokens. */

const RULES = [
  {
    effect: 'deny',
    when: 'action == "webhooks.write" && "team-a" in principal.groups && !resource.webhook.name.startsWith("team-a-")',
  },
  { effect: 'deny', when: 'action == "runs.delete" && principal.kind == "key"' },
  {
    effect: 'deny',
    when: 'action == "traces.write" && principal.email.endsWith("@contractor.example")',
  },
  {
    effect: 'deny',
    when: 'action == "traces.read" && "env" in resource.labels && resource.labels["env"] == "prod"',
  },
];

describe('access rules (auth.rules)', () => {
  let idp: TestProvider;
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    idp = await startTestProvider([
      { id: 'ana', claims: { email: 'ana@example.com', groups: ['team-a'] } },
      { id: 'cy', claims: { email: 'cy@contractor.example', groups: ['ingesters'] } },
      { id: 'ida', claims: { email: 'ida@example.com', groups: ['ingesters'] } },
    ]);
    t = await testApp({
      webhooks: { allow_hosts: ['127.0.0.1'] },
      auth: {
        allow_hosts: ['127.0.0.1'],
        oidc: [
          {
            issuer: idp.issuer,
            audiences: [API_AUDIENCE],
            mappings: [
              { groups: ['team-a'], project: 'p1', roles: ['admin'] },
              { groups: ['ingesters'], project: 'p1', roles: ['ingest'] },
            ],
          },
        ],
        rules: RULES,
      },
    });
    admin = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['admin'] })).secret;
  });
  afterAll(async () => {
    await t?.close();
    await idp.close();
  });

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, bearer: string, body?: unknown) =>
    t.app.server.inject({
      method,
      url,
      ...(body === undefined ? {} : { payload: body as object }),
      headers: { authorization: `Bearer ${bearer}`, 'x-request-id': requestId(method, url) },
    });
  const requestId = (method: string, url: string) =>
    `${method}${url}`.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
  const webhook = (name: string) => ({ name, url: 'http://127.0.0.1:9/hook' });

  it('REST: a group may write only the webhooks its rule leaves it; reads and other callers are untouched', async () => {
    const ana = await idp.token('ana');
    expect((await call('POST', '/v1alpha1/webhooks', ana, webhook('team-a-ci'))).statusCode).toBe(
      200,
    );
    const denied = await call('POST', '/v1alpha1/webhooks', ana, webhook('prod'));
    expect(denied.statusCode).toBe(403);
    expect(denied.json().error.code).toBe('AUTH_DENIED_BY_RULE');
    expect(denied.json().error.message).toContain('auth.rules[0]');
    // The admin key is not in the group: the same write passes, and the group still reads it.
    expect((await call('POST', '/v1alpha1/webhooks', admin, webhook('prod'))).statusCode).toBe(200);
    expect((await call('GET', '/v1alpha1/webhooks/prod', ana)).statusCode).toBe(200);
    expect((await call('POST', '/v1alpha1/webhooks/prod:test', ana)).statusCode).toBe(403);
    expect((await call('DELETE', '/v1alpha1/webhooks/prod', ana)).statusCode).toBe(403);
    expect((await call('DELETE', '/v1alpha1/webhooks/team-a-ci', ana)).statusCode).toBe(200);
  });

  it('a denial by rule is audited as a denial', async () => {
    await t.app.audit.flush();
    const res = await call('GET', '/v1alpha1/audit?page_size=1000', admin);
    const entries = res.json().entries as { requestId: string; outcome: string; status: number }[];
    const entry = entries.find(
      (e) => e.requestId === requestId('POST', '/v1alpha1/webhooks/prod:test'),
    );
    expect(entry).toMatchObject({ outcome: 'denied', status: 403 });
  });

  it('Connect: a rule on the action refuses API keys the roles allow', async () => {
    const deleteRun = (bearer: string) =>
      t.app.server.inject({
        method: 'POST',
        url: '/touchstone.v1alpha1.RunService/DeleteRun',
        payload: { id: 'run_missing', project: 'p1' },
        headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
      });
    const byKey = await deleteRun(admin);
    expect(byKey.statusCode).toBe(403);
    expect(byKey.json()).toMatchObject({ code: 'permission_denied' });
    expect(byKey.json().message).toContain('auth.rules[1]');
    // A provider token with the same role is past the rule: the run is simply not there.
    expect((await deleteRun(await idp.token('ana'))).statusCode).toBe(404);
  });

  it('OTLP: a rule on the email refuses one ingester and not another', async () => {
    const spans = recordSpans({ 'service.name': 'agent' }, (tracer) => {
      agentTrace(tracer, { fail: false });
    });
    const send = async (client: string) =>
      t.app.server.inject({
        method: 'POST',
        url: '/v1/traces',
        payload: jsonBody(spans),
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${await idp.token(client)}`,
        },
      });
    const contractor = await send('cy');
    expect(contractor.statusCode).toBe(403);
    expect(JSON.stringify(contractor.json())).toContain('auth.rules[2]');
    expect((await send('ida')).statusCode).toBe(200);
  });

  it('REST: a rule on the label filter a trace list names', async () => {
    const prod = await call('GET', '/v1alpha1/traces?labels=env=prod', admin);
    expect(prod.statusCode).toBe(403);
    expect(prod.json().error.message).toContain('auth.rules[3]');
    expect((await call('GET', '/v1alpha1/traces?labels=env=dev', admin)).statusCode).toBe(200);
    expect((await call('GET', '/v1alpha1/traces', admin)).statusCode).toBe(200);
  });
});

describe('an invalid access rule', () => {
  it('fails startup naming the rule by index and the CEL problem, never its text', async () => {
    const started = testApp({
      auth: {
        rules: [
          { effect: 'allow', when: 'true' },
          { effect: 'deny', when: 'principal.email == "hidden-marker@example.com" &&' },
        ],
      },
    });
    await expect(started).rejects.toThrow(/auth\.rules\[1\]\.when: line 1, column \d+/);
    await expect(started).rejects.not.toThrow(/hidden-marker/);
  });
});
