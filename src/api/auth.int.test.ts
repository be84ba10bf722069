import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import {
  API_AUDIENCE,
  startTestProvider,
  type TestProvider,
} from '../../test/support/oidc-provider.js';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import {
  hashSecret,
  OPEN_PRINCIPAL,
  type Permission,
  ROLE_PERMISSIONS,
  ROLES,
  type Role,
} from '../auth/index.js';
import { OPERATIONS, openApiDocument } from './openapi.js';

type Call = { method: 'GET' | 'POST' | 'DELETE'; url: string; body?: unknown };

/**
 * How an endpoint reads traces, for the scope dimension: `item` reads one trace by id (a caller
 * whose scope excludes it gets 404), `list` lists traces or what hangs off them (it is left out).
 */
type Reads = 'item' | 'list';

/** Every authenticated endpoint (a test checks none is missing), with the roles that may call it. */
const MATRIX: { name: string; call: Call; allowed: Role[]; reads?: Reads }[] = [
  {
    name: 'whoami',
    call: { method: 'GET', url: '/v1alpha1/whoami' },
    allowed: ['viewer', 'ingest', 'editor', 'admin', 'owner'],
  },
  {
    name: 'OTLP traces',
    call: { method: 'POST', url: '/v1/traces', body: { resourceSpans: [] } },
    allowed: ['ingest', 'editor', 'admin', 'owner'],
  },
  {
    name: 'OTLP logs',
    call: { method: 'POST', url: '/v1/logs', body: { resourceLogs: [] } },
    allowed: ['ingest', 'editor', 'admin', 'owner'],
  },
  {
    name: 'get trace',
    call: { method: 'GET', url: '/v1alpha1/traces/TRACE_KEPT' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
    reads: 'item',
  },
  {
    name: 'trace trajectory',
    call: { method: 'GET', url: '/v1alpha1/traces/TRACE_KEPT/trajectory' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
    reads: 'item',
  },
  {
    name: 'aggregate scores',
    call: { method: 'GET', url: '/v1alpha1/scores:aggregate' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'apply webhook',
    call: {
      method: 'POST',
      url: '/v1alpha1/webhooks',
      body: { name: 'applied-hook', url: 'https://example.com/hook' },
    },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'list webhooks',
    call: { method: 'GET', url: '/v1alpha1/webhooks' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'get webhook',
    call: { method: 'GET', url: '/v1alpha1/webhooks/hook' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'test webhook',
    call: { method: 'POST', url: '/v1alpha1/webhooks/hook:test' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'webhook deliveries',
    call: { method: 'GET', url: '/v1alpha1/webhooks/hook/deliveries' },
    allowed: ['admin', 'owner'],
    reads: 'list',
  },
  {
    name: 'delete webhook',
    call: { method: 'DELETE', url: '/v1alpha1/webhooks/DROP_HOOK' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'list datasets',
    call: { method: 'GET', url: '/v1alpha1/datasets' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'dataset records',
    call: { method: 'GET', url: '/v1alpha1/datasets/kept/records' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'create key',
    call: { method: 'POST', url: '/v1alpha1/keys', body: { project: 'p1', roles: ['viewer'] } },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'list keys',
    call: { method: 'GET', url: '/v1alpha1/keys' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'revoke key',
    call: { method: 'DELETE', url: '/v1alpha1/keys/REVOKE_ME' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'evaluate',
    call: {
      method: 'POST',
      url: '/v1alpha1/evaluate',
      body: { records: [{ output: '{}' }], evaluators: [{ ref: 'json-valid' }] },
    },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'list evaluators',
    call: { method: 'GET', url: '/v1alpha1/evaluators' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  { name: 'metrics', call: { method: 'GET', url: '/metrics' }, allowed: ['admin', 'owner'] },
  {
    name: 'list audit entries',
    call: { method: 'GET', url: '/v1alpha1/audit' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'apply policy',
    call: { method: 'POST', url: '/v1alpha1/policies', body: policy('applied') },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'validate policy',
    call: { method: 'POST', url: '/v1alpha1/policies?validate_only=true', body: policy('dry') },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'list policies',
    call: { method: 'GET', url: '/v1alpha1/policies' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'get policy',
    call: { method: 'GET', url: '/v1alpha1/policies/kept' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'delete policy',
    call: { method: 'DELETE', url: '/v1alpha1/policies/DELETE_ME' },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'rescore policy',
    call: {
      method: 'POST',
      url: '/v1alpha1/policies/kept:rescore',
      body: { since: '2026-01-01T00:00:00Z' },
    },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'apply guard policy',
    call: { method: 'POST', url: '/v1alpha1/guardpolicies', body: guardPolicy('applied-guard') },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'list guard policies',
    call: { method: 'GET', url: '/v1alpha1/guardpolicies' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'get guard policy',
    call: { method: 'GET', url: '/v1alpha1/guardpolicies/kept-guard' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'delete guard policy',
    call: { method: 'DELETE', url: '/v1alpha1/guardpolicies/DROP_GUARD' },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'prompt-guard request',
    call: {
      method: 'POST',
      url: '/v1alpha1/guardrails/kept-guard/request',
      body: { body: { messages: [{ role: 'user', content: 'hi' }] } },
    },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'prompt-guard response',
    call: {
      method: 'POST',
      url: '/v1alpha1/guardrails/kept-guard/response',
      body: { body: { choices: [{ message: { role: 'assistant', content: 'hello' } }] } },
    },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'list scores',
    call: { method: 'GET', url: '/v1alpha1/scores' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
    reads: 'list',
  },
  {
    name: 'validate source',
    call: { method: 'POST', url: '/v1alpha1/sources?validate_only=true', body: source('dry') },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'apply source',
    call: { method: 'POST', url: '/v1alpha1/sources', body: source('applied') },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'list sources',
    call: { method: 'GET', url: '/v1alpha1/sources' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'get source',
    call: { method: 'GET', url: '/v1alpha1/sources/feed' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'pause source',
    call: { method: 'POST', url: '/v1alpha1/sources/feed:pause' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'resume source',
    call: { method: 'POST', url: '/v1alpha1/sources/feed:resume' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'backfill source',
    call: {
      method: 'POST',
      url: '/v1alpha1/sources/feed:backfill',
      body: { since: '2026-01-01T00:00:00Z' },
    },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'delete source',
    call: { method: 'DELETE', url: '/v1alpha1/sources/DROP_ME' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'list traces',
    call: { method: 'GET', url: '/v1alpha1/traces' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
    reads: 'list',
  },
  {
    name: 'trace scores',
    call: { method: 'GET', url: '/v1alpha1/traces/TRACE_KEPT/scores' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
    reads: 'item',
  },
  {
    name: 'annotate trace',
    call: {
      method: 'POST',
      url: '/v1alpha1/traces/TRACE_KEPT/annotations',
      body: { name: 'correct', passed: true, comment: 'checked by hand' },
    },
    allowed: ['editor', 'admin', 'owner'],
    reads: 'item',
  },
  {
    name: 'create run',
    call: { method: 'POST', url: '/v1alpha1/runs', body: run('created') },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'validate run',
    call: { method: 'POST', url: '/v1alpha1/runs?validate_only=true', body: run('dry') },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'list runs',
    call: { method: 'GET', url: '/v1alpha1/runs' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'get run',
    call: { method: 'GET', url: '/v1alpha1/runs/RUN_KEPT' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'list run results',
    call: { method: 'GET', url: '/v1alpha1/runs/RUN_KEPT/results' },
    allowed: ['viewer', 'editor', 'admin', 'owner'],
  },
  {
    name: 'cancel run',
    call: { method: 'POST', url: '/v1alpha1/runs/RUN_KEPT:cancel' },
    allowed: ['editor', 'admin', 'owner'],
  },
  {
    name: 'delete run',
    call: { method: 'DELETE', url: '/v1alpha1/runs/RUN_DROP' },
    allowed: ['admin', 'owner'],
  },
  {
    name: 'upload dataset',
    call: { method: 'POST', url: '/v1alpha1/datasets/qa/upload', body: { input: 'q' } },
    allowed: ['editor', 'admin', 'owner'],
  },
];

/**
 * The error code of a refusal: REST and Connect bodies name it; an OTLP door answers a
 * google.rpc.Status (gRPC code and message), from which it is told apart.
 */
function errorCode(res: { json(): unknown }): string {
  const body = res.json() as { error?: { code: string }; code?: number; message?: string };
  if (body.error !== undefined) return body.error.code;
  if (body.code === 16) return 'UNAUTHENTICATED';
  return body.message?.includes('auth.rules') ? 'AUTH_DENIED_BY_RULE' : 'PERMISSION_DENIED';
}

/** The catalogue's operation a call reaches (path parameters match one segment, verbs included). */
function operationOf(call: Call) {
  const path = call.url.split('?')[0] as string;
  return OPERATIONS.find(
    (op) =>
      op.method === call.method.toLowerCase() &&
      new RegExp(`^${op.path.replace(/\{\w+\}/g, '[^/:]+')}$`).test(path),
  );
}

function run(name: string) {
  return {
    name,
    dataset: { records: [{ input: 'q', output: 'a', reference: 'a' }] },
    evaluators: [{ ref: 'exact-match' }],
  };
}

function source(name: string) {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'TraceSource',
    metadata: { name },
    spec: { connector: 'mlflow', endpoint: 'http://127.0.0.1:5000', locations: ['agent'] },
  };
}

function guardPolicy(name: string) {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'GuardPolicy',
    metadata: { name },
    spec: { checks: [{ type: 'pii', action: 'mask' }] },
  };
}

function policy(name: string) {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'OnlineEvalPolicy',
    metadata: { name },
    spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
  };
}

/** The two kinds of credential every endpoint × role pair is tried with. */
const DOORS = ['key', 'oidc'] as const;

/** Read scopes that hold the kept trace (its service is `agent`) or do not. */
type Side = 'in' | 'out';
const SCOPES: Record<Side, { services: string[] }> = {
  in: { services: ['agent'] },
  out: { services: ['elsewhere'] },
};

describe('API keys, identity-provider tokens and roles (auth section present)', () => {
  let t: TestApp;
  let idp: TestProvider;
  /** Per credential kind and role: an API key of p1, or a provider token mapped to p1. */
  const credentials = { key: {}, oidc: {} } as Record<(typeof DOORS)[number], Record<Role, string>>;
  const secrets = credentials.key;
  let keptRun: string;
  let keptTrace = '';
  let ruledOwner = '';
  let noAgentOwner = '';
  /** Per door: an admin of p1 whose scope holds the kept trace's service (`in`) or not (`out`). */
  const scoped = { key: {}, oidc: {} } as Record<(typeof DOORS)[number], Record<Side, string>>;

  beforeAll(async () => {
    // A real OIDC provider: one client per role, its group mapped to that role in p1.
    idp = await startTestProvider([
      ...ROLES.map((role) => ({ id: `user-${role}`, claims: { groups: [`touchstone-${role}`] } })),
      { id: 'user-ruled', claims: { groups: ['touchstone-owner', 'ruled'] } },
      { id: 'scoped-out', claims: { groups: ['scoped-out'] } },
      { id: 'scoped-in', claims: { groups: ['scoped-in'] } },
      { id: 'no-agent', claims: { groups: ['touchstone-owner', 'no-agent'] } },
    ]);
    t = await testApp({
      auth: {
        allow_hosts: ['127.0.0.1'],
        oidc: [
          {
            issuer: idp.issuer,
            audiences: [API_AUDIENCE],
            mappings: [
              ...ROLES.map((role) => ({
                groups: [`touchstone-${role}`],
                project: 'p1',
                roles: [role],
              })),
              ...(['in', 'out'] as const).map((side) => ({
                groups: [`scoped-${side}`],
                project: 'p1',
                roles: ['admin' as const],
                scope: SCOPES[side],
              })),
            ],
          },
        ],
        // Every endpoint passes through the rules: an owner in this group is refused everywhere.
        rules: [
          { effect: 'deny', when: '"ruled" in principal.groups' },
          // Rules see the service of the trace a call reads by id.
          { effect: 'deny', when: '"no-agent" in principal.groups && resource.service == "agent"' },
        ],
      },
      sources: { allow_hosts: ['127.0.0.1'] },
      traces: { completion_grace: '100ms' },
    });
    for (const role of ROLES) {
      secrets[role] = (
        await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: [role], name: role })
      ).secret;
      credentials.oidc[role] = await idp.token(`user-${role}`);
    }
    ruledOwner = await idp.token('user-ruled');
    noAgentOwner = await idp.token('no-agent');
    for (const side of ['in', 'out'] as const) {
      const key = { project: 'p1', roles: ['admin' as const], scope: SCOPES[side] };
      scoped.key[side] = (await t.app.keys.create(OPEN_PRINCIPAL, key)).secret;
      scoped.oidc[side] = await idp.token(`scoped-${side}`);
    }
    await t.app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'hook',
      project: 'p1',
      url: 'https://example.com/hook',
      events: ['trace.scored'],
    });
    const dataset = {
      method: 'POST',
      url: '/v1alpha1/datasets/kept/upload',
      body: { input: 'q' },
    } as const;
    expect((await send(dataset, secrets.owner)).statusCode).toBe(200);
    await t.app.policies.apply(OPEN_PRINCIPAL, policy('kept'), { project: 'p1' });
    await t.app.guardrails.service.apply(OPEN_PRINCIPAL, guardPolicy('kept-guard'), {
      project: 'p1',
    });
    await t.app.sources.apply(OPEN_PRINCIPAL, source('feed'), { project: 'p1' });
    keptRun = (await t.app.runs.create(OPEN_PRINCIPAL, run('kept'), { project: 'p1' })).id;
    await t.app.runExecutor.drain();
    keptTrace = await completedTrace();
    // An annotation scores the trace: a trace.scored delivery of the kept trace to `hook`.
    const annotate = {
      method: 'POST',
      url: `/v1alpha1/traces/${keptTrace}/annotations`,
      body: { name: 'ok', passed: true },
    } as const;
    expect((await send(annotate, secrets.owner)).statusCode).toBe(200);
  });
  afterAll(async () => {
    await t.close();
    await idp.close();
  });

  /** One agent trace of p1, sent over OTLP and completed. */
  async function completedTrace(): Promise<string> {
    const ingest = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['ingest'] });
    let id = '';
    const spans = recordSpans({ 'service.name': 'agent' }, (tracer) => {
      id = agentTrace(tracer, { fail: false });
    });
    const sent = await t.app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ingest.secret}` },
    });
    expect(sent.statusCode).toBe(200);
    for (let i = 0; i < 100 && (await t.app.store.traces.get('p1', id)) === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      await t.app.completer.tick();
    }
    return id;
  }

  const send = (call: Call, secret?: string) =>
    t.app.server.inject({
      method: call.method,
      url: call.url,
      ...(call.body === undefined ? {} : { payload: JSON.stringify(call.body) }),
      headers: {
        ...(call.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(secret === undefined ? {} : { authorization: `Bearer ${secret}` }),
      },
    });

  it('health routes, the OpenAPI document and the UI’s sign-in need no credential', async () => {
    expect((await send({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect((await send({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    const openapi = { method: 'GET', url: '/v1alpha1/openapi.json' } as const;
    expect((await send(openapi)).statusCode).toBe(200);
    for (const role of ROLES) expect((await send(openapi, secrets[role])).statusCode).toBe(200);
    // The UI's sign-in answers without a credential (here: that the server has none to offer).
    const signIn = await send({ method: 'GET', url: '/ui/login/config' });
    expect(signIn.json().error.code).toBe('UI_SIGN_IN_NOT_CONFIGURED');
  });

  it('the OpenAPI document names the permission each endpoint here needs', () => {
    const publicOps = OPERATIONS.filter((op) => op.access === 'public').map((op) => op.path);
    expect(publicOps.sort()).toEqual([
      '/healthz',
      '/readyz',
      '/ui/login/config',
      '/ui/login/token',
      '/v1alpha1/openapi.json',
    ]);
    for (const entry of MATRIX) {
      const op = operationOf(entry.call);
      expect(op, entry.name).toBeDefined();
      const needed = op?.access as Permission | 'any-key';
      const holders = ROLES.filter((r) => needed === 'any-key' || ROLE_PERMISSIONS[r].has(needed));
      expect(holders, entry.name).toEqual(entry.allowed);
    }
  });

  it('names every endpoint that needs a credential', () => {
    const named = new Set(MATRIX.map((entry) => operationOf(entry.call)));
    const missing = OPERATIONS.filter((op) => op.access !== 'public' && !named.has(op));
    expect(missing.map((op) => `${op.method} ${op.path}`)).toEqual([]);
  });

  it('the bodies sent here, which the server accepts, match the documented request bodies', () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema({ components: (openApiDocument() as { components: object }).components }, 'doc');
    let checked = 0;
    for (const entry of MATRIX) {
      const names = operationOf(entry.call)?.body;
      if (names === undefined || entry.call.body === undefined) continue;
      const validate = ajv.compile({
        anyOf: names.map((n) => ({ $ref: `doc#/components/schemas/${n}` })),
      });
      expect(validate(entry.call.body), entry.name).toBe(true);
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(10);
  });

  /** The call with its placeholders replaced by resources made for it. */
  async function prepared(entry: Call): Promise<Call> {
    let call = entry;
    if (call.url.includes('REVOKE_ME')) {
      const victim = await t.app.keys.create(OPEN_PRINCIPAL, {
        project: 'p1',
        roles: ['viewer'],
      });
      call = { ...call, url: call.url.replace('REVOKE_ME', victim.key.id) };
    }
    if (call.url.includes('DROP_ME')) {
      await t.app.sources.apply(OPEN_PRINCIPAL, source('dropped'), { project: 'p1' });
      call = { ...call, url: call.url.replace('DROP_ME', 'dropped') };
    }
    if (call.url.includes('DELETE_ME')) {
      await t.app.policies.apply(OPEN_PRINCIPAL, policy('doomed'), { project: 'p1' });
      call = { ...call, url: call.url.replace('DELETE_ME', 'doomed') };
    }
    if (call.url.includes('DROP_GUARD')) {
      await t.app.guardrails.service.apply(OPEN_PRINCIPAL, guardPolicy('doomed-guard'), {
        project: 'p1',
      });
      call = { ...call, url: call.url.replace('DROP_GUARD', 'doomed-guard') };
    }
    if (call.url.includes('DROP_HOOK')) {
      await t.app.webhooks.service.apply(OPEN_PRINCIPAL, {
        name: 'doomed-hook',
        project: 'p1',
        url: 'https://example.com/hook',
      });
      call = { ...call, url: call.url.replace('DROP_HOOK', 'doomed-hook') };
    }
    if (call.url.includes('TRACE_KEPT')) {
      call = { ...call, url: call.url.replace('TRACE_KEPT', keptTrace) };
    }
    if (call.url.includes('RUN_KEPT')) {
      call = { ...call, url: call.url.replace('RUN_KEPT', keptRun) };
    }
    if (call.url.includes('RUN_DROP')) {
      // A finished run: deletion of pending or running runs is refused for every role.
      const doomed = await t.app.runs.create(OPEN_PRINCIPAL, run('doomed'), { project: 'p1' });
      await t.app.runExecutor.drain();
      call = { ...call, url: call.url.replace('RUN_DROP', doomed.id) };
    }
    return call;
  }

  for (const entry of MATRIX) {
    it(`${entry.name}: 401 without or with a bad key`, async () => {
      const none = await send(entry.call);
      expect(none.statusCode).toBe(401);
      expect(errorCode(none)).toBe('UNAUTHENTICATED');
      expect((await send(entry.call, 'tsk_not-a-real-key')).statusCode).toBe(401);
    });

    for (const [door, role] of DOORS.flatMap((d) => ROLES.map((r) => [d, r] as const))) {
      const allowed = entry.allowed.includes(role);
      it(`${entry.name} as ${role} (${door}): ${allowed ? 'allowed' : '403'}`, async () => {
        const call = await prepared(entry.call);
        const res = await send(call, credentials[door][role]);
        if (allowed) {
          expect(res.statusCode).toBe(200);
        } else {
          expect(res.statusCode).toBe(403);
          expect(errorCode(res)).toBe('PERMISSION_DENIED');
        }
      });
    }

    // `whoami` answers whoever holds a credential (the UI shows who is signed in), rules or not.
    if (entry.name === 'whoami') continue;
    it(`${entry.name} as owner held by a deny rule (oidc): 403 by the rule`, async () => {
      const res = await send(await prepared(entry.call), ruledOwner);
      expect(res.statusCode).toBe(403);
      expect(errorCode(res)).toBe('AUTH_DENIED_BY_RULE');
    });

    const reads = entry.reads;
    if (reads === undefined) continue;
    it(`${entry.name} under a rule on the service read: ${reads === 'item' ? '403' : 'allowed'}`, async () => {
      const res = await send(await prepared(entry.call), noAgentOwner);
      expect(res.statusCode).toBe(reads === 'item' ? 403 : 200);
      if (reads === 'item') expect(errorCode(res)).toBe('AUTH_DENIED_BY_RULE');
    });

    for (const door of DOORS) {
      it(`${entry.name} (${door}) within a scope holding the trace, or not`, async () => {
        const call = await prepared(entry.call);
        const inside = await send(call, scoped[door].in);
        expect(inside.statusCode, inside.body).toBe(200);
        const outside = await send(call, scoped[door].out);
        if (reads === 'item') {
          expect(outside.statusCode).toBe(404);
          expect(errorCode(outside)).toBe('TRACE_NOT_FOUND');
          return;
        }
        expect(outside.statusCode).toBe(200);
        expect(outside.body).not.toContain(keptTrace);
        // Within the scope the answer holds the trace exactly when an unscoped owner's does.
        const owner = await send(call, secrets.owner);
        expect(inside.body.includes(keptTrace)).toBe(owner.body.includes(keptTrace));
        expect(owner.body).toContain(keptTrace);
      });
    }
  }

  it('a key acts only on its own project', async () => {
    const res = await send(
      {
        method: 'POST',
        url: '/v1alpha1/evaluate',
        body: { project: 'other', records: [{ output: '1' }], evaluators: [{ ref: 'json-valid' }] },
      },
      secrets.editor,
    );
    expect(res.statusCode).toBe(403);
  });

  it('a key lists the keys of its own project only: naming another project is 403', async () => {
    await t.app.keys.create(OPEN_PRINCIPAL, {
      project: 'p2',
      roles: ['viewer'],
      name: 'elsewhere',
    });
    const other = await send({ method: 'GET', url: '/v1alpha1/keys?project=p2' }, secrets.admin);
    expect(other.statusCode).toBe(403);
    expect(other.json().error.code).toBe('PERMISSION_DENIED');
    expect(other.body).not.toContain('elsewhere');
    const own = await send({ method: 'GET', url: '/v1alpha1/keys?project=p1' }, secrets.admin);
    expect(own.statusCode).toBe(200);
    expect(own.json().keys.map((k: { project: string }) => k.project)).not.toContain('p2');
  });

  it('/metrics names the permission it needs; an admin key of any project reads it', async () => {
    const viewer = await send({ method: 'GET', url: '/metrics' }, secrets.viewer);
    expect(viewer.statusCode).toBe(403);
    expect(viewer.json().error.message).toContain('metrics.read');
    const scraper = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'ops', roles: ['admin'] });
    const res = await send({ method: 'GET', url: '/metrics' }, scraper.secret);
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('touchstone_http_requests_total');
  });

  it('refuses to create a key that has already expired', async () => {
    const res = await send(
      {
        method: 'POST',
        url: '/v1alpha1/keys',
        body: { project: 'p1', roles: ['viewer'], expiresAt: '2001-01-01T00:00:00Z' },
      },
      secrets.admin,
    );
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details).toEqual([
      { path: 'expiresAt', message: 'must be a time after now' },
    ]);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    const ok = await send(
      {
        method: 'POST',
        url: '/v1alpha1/keys',
        body: { project: 'p1', roles: ['viewer'], expiresAt: future },
      },
      secrets.admin,
    );
    expect(ok.statusCode).toBe(200);
  });

  it('an admin cannot mint or revoke owner keys', async () => {
    const res = await send(
      { method: 'POST', url: '/v1alpha1/keys', body: { project: 'p1', roles: ['owner'] } },
      secrets.admin,
    );
    expect(res.statusCode).toBe(403);
    expect(errorCode(res)).toBe('KEY_ROLE_NOT_ALLOWED');
    const owner = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['owner'] });
    const revoke = await send(
      { method: 'DELETE', url: `/v1alpha1/keys/${owner.key.id}` },
      secrets.admin,
    );
    expect(revoke.statusCode).toBe(403);
  });

  it('returns the secret once, lists keys without it, stores only its hash', async () => {
    const created = await send(
      {
        method: 'POST',
        url: '/v1alpha1/keys',
        body: { project: 'p1', roles: ['ingest'], labels: { team: 'a' } },
      },
      secrets.owner,
    );
    const { key, secret } = created.json();
    expect(secret).toMatch(/^tsk_[A-Za-z0-9_-]{43}$/);
    expect(key).toMatchObject({ project: 'p1', roles: ['ingest'], labels: { team: 'a' } });
    expect(JSON.stringify(key)).not.toContain(secret);

    const list = await send({ method: 'GET', url: '/v1alpha1/keys?page_size=2' }, secrets.owner);
    expect(list.body).not.toContain(secret);
    expect(list.body).not.toMatch(/secretHash|secret_hash/);
    expect(list.json().keys).toHaveLength(2);
    expect(list.json().next_page_token).toBeDefined();

    await t.app.store.close();
    const db = readFileSync(join(t.dataDir, 'touchstone.db'));
    const wal = (() => {
      try {
        return readFileSync(join(t.dataDir, 'touchstone.db-wal'));
      } catch {
        return Buffer.alloc(0);
      }
    })();
    expect(db.includes(secret)).toBe(false);
    expect(wal.includes(secret)).toBe(false);
  });
});

describe('revocation and expiry', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({ auth: {} });
  });
  afterAll(() => t.close());

  it('a revoked key answers 401 at once; an expired key too', async () => {
    const { key, secret } = await t.app.keys.create(OPEN_PRINCIPAL, {
      project: 'p1',
      roles: ['viewer'],
    });
    const ok = await t.app.server.inject({
      url: '/v1alpha1/evaluators',
      headers: { authorization: `Bearer ${secret}` },
    });
    expect(ok.statusCode).toBe(200);
    await t.app.keys.revoke(OPEN_PRINCIPAL, key.id);
    const after = await t.app.server.inject({
      url: '/v1alpha1/evaluators',
      headers: { authorization: `Bearer ${secret}` },
    });
    expect(after.statusCode).toBe(401);
    expect(after.json().error.message).toMatch(/revoked/);

    // Keys cannot be created expired, so this one is written to the store as it would be found
    // after its expiry passed.
    const expired = 'tsk_expired-key-for-this-test';
    await t.app.store.keys.create({
      id: 'key_expired',
      project: 'p1',
      name: '',
      roles: ['viewer'],
      labels: {},
      prefix: expired.slice(0, 8),
      createdAt: '2000-01-01T00:00:00.000Z',
      expiresAt: '2001-01-01T00:00:00.000Z',
      secretHash: hashSecret(expired),
    });
    const res = await t.app.server.inject({
      url: '/v1alpha1/evaluators',
      headers: { authorization: `Bearer ${expired}` },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.message).toMatch(/expired/);
  });
});
