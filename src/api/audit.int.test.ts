import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import {
  API_AUDIENCE,
  startTestProvider,
  type TestProvider,
} from '../../test/support/oidc-provider.js';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { OPEN_PRINCIPAL, type Role } from '../auth/index.js';

/** The audit trail: every write and every refusal, on every door, readable by admins. */

const policy = (name: string) => ({
  apiVersion: 'touchstone.dev/v1alpha1',
  kind: 'OnlineEvalPolicy',
  metadata: { name },
  spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
});

describe('audit trail', () => {
  let t: TestApp;
  let idp: TestProvider;
  const keys = {} as Record<Role | 'otherAdmin', { id: string; secret: string }>;

  beforeAll(async () => {
    idp = await startTestProvider([
      { id: 'dana', claims: { email: 'dana@example.com', groups: ['eng'] } },
    ]);
    t = await testApp({
      auth: {
        allow_hosts: ['127.0.0.1'],
        oidc: [
          {
            issuer: idp.issuer,
            audiences: [API_AUDIENCE],
            mappings: [{ groups: ['eng'], project: 'p1', roles: ['editor'] }],
          },
        ],
      },
    });
    for (const role of ['viewer', 'ingest', 'editor', 'admin'] as const) {
      const made = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: [role] });
      keys[role] = { id: made.key.id, secret: made.secret };
    }
    const other = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p2', roles: ['admin'] });
    keys.otherAdmin = { id: other.key.id, secret: other.secret };
  });
  afterAll(async () => {
    await t.close();
    await idp.close();
  });

  const call = (
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    secret?: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) =>
    t.app.server.inject({
      method,
      url,
      ...(body === undefined ? {} : { payload: body as object }),
      headers: {
        ...(secret === undefined ? {} : { authorization: `Bearer ${secret}` }),
        ...headers,
      },
    });

  /** Entries of one request, after the trail is flushed. */
  async function entriesOf(requestId: string) {
    await t.app.audit.flush();
    const res = await call('GET', '/v1alpha1/audit?page_size=1000', keys.admin.secret);
    expect(res.statusCode).toBe(200);
    return (res.json().entries as { requestId: string }[]).filter((e) => e.requestId === requestId);
  }
  const rid = (n: string) => ({ 'x-request-id': n });

  it('records a write with who, kind, action, resource, project, outcome and request id', async () => {
    const res = await call(
      'POST',
      '/v1alpha1/policies',
      keys.editor.secret,
      policy('kept'),
      rid('w-1'),
    );
    expect(res.statusCode).toBe(200);
    const [entry, ...more] = await entriesOf('w-1');
    expect(more).toEqual([]);
    expect(entry).toMatchObject({
      principal: keys.editor.id,
      principalKind: 'key',
      action: 'POST /v1alpha1/policies',
      resource: '/v1alpha1/policies',
      project: 'p1',
      outcome: 'ok',
      status: 200,
      requestId: 'w-1',
    });
    expect(Date.parse((entry as unknown as { at: string }).at)).toBeGreaterThan(
      Date.now() - 60_000,
    );
  });

  it('records a permission denial and an unauthenticated call', async () => {
    await call('DELETE', '/v1alpha1/policies/kept', keys.viewer.secret, undefined, rid('d-1'));
    expect(await entriesOf('d-1')).toEqual([
      expect.objectContaining({
        principal: keys.viewer.id,
        principalKind: 'key',
        action: 'DELETE /v1alpha1/policies/:name',
        resource: '/v1alpha1/policies/kept',
        outcome: 'denied',
        status: 403,
        code: 'PERMISSION_DENIED',
      }),
    ]);
    // A read refused is a denial too; a read allowed is not recorded.
    await call('GET', '/v1alpha1/keys', keys.viewer.secret, undefined, rid('d-2'));
    expect(await entriesOf('d-2')).toHaveLength(1);
    await call('GET', '/v1alpha1/policies', keys.viewer.secret, undefined, rid('r-1'));
    expect(await entriesOf('r-1')).toHaveLength(0);
    await call('POST', '/v1alpha1/policies', 'tsk_not-a-key', policy('x'), rid('d-3'));
    expect(await entriesOf('d-3')).toEqual([
      expect.objectContaining({
        principal: '',
        principalKind: 'anonymous',
        outcome: 'denied',
        status: 401,
        code: 'UNAUTHENTICATED',
      }),
    ]);
  });

  it('records identity-provider principals as oidc, with issuer and subject', async () => {
    const token = await idp.token('dana');
    const res = await call('POST', '/v1alpha1/policies', token, policy('by-dana'), rid('o-1'));
    expect(res.statusCode).toBe(200);
    expect(await entriesOf('o-1')).toEqual([
      expect.objectContaining({
        principal: `${idp.issuer}#dana`,
        principalKind: 'oidc',
        outcome: 'ok',
      }),
    ]);
  });

  it('OTLP: refusals are recorded, accepted ingest is not; RPC refusals are recorded', async () => {
    const spans = recordSpans({ 'service.name': 'agent' }, (tracer) => {
      agentTrace(tracer, { fail: false });
    });
    const otlp = (secret: string | undefined, id: string) =>
      call('POST', '/v1/traces', secret, jsonBody(spans), {
        'content-type': 'application/json',
        ...rid(id),
      });
    expect((await otlp(keys.ingest.secret, 'i-1')).statusCode).toBe(200);
    expect(await entriesOf('i-1')).toHaveLength(0);
    expect((await otlp(keys.viewer.secret, 'i-2')).statusCode).toBe(403);
    expect(await entriesOf('i-2')).toEqual([
      expect.objectContaining({
        action: 'POST /v1/traces',
        outcome: 'denied',
        code: 'PERMISSION_DENIED',
      }),
    ]);
    const rpc = (secret: string | undefined, id: string, type = 'application/json') =>
      call(
        'POST',
        '/touchstone.v1alpha1.RunService/DeleteRun',
        secret,
        { id: 'run_x', project: 'p1' },
        {
          'content-type': type,
          ...rid(id),
        },
      );
    expect((await rpc(keys.viewer.secret, 'c-1')).statusCode).toBe(403);
    expect(await entriesOf('c-1')).toEqual([
      expect.objectContaining({
        action: 'POST /touchstone.v1alpha1.RunService/DeleteRun',
        principal: keys.viewer.id,
        outcome: 'denied',
        code: 'PERMISSION_DENIED',
      }),
    ]);
    expect((await rpc(undefined, 'c-2')).statusCode).toBe(401);
    expect(await entriesOf('c-2')).toEqual([
      expect.objectContaining({
        principalKind: 'anonymous',
        outcome: 'denied',
        code: 'UNAUTHENTICATED',
      }),
    ]);
  });

  it('never holds a secret: a key created and a bearer refused leave no trace of either', async () => {
    const made = await call(
      'POST',
      '/v1alpha1/keys',
      keys.admin.secret,
      { roles: ['viewer'] },
      rid('s-1'),
    );
    expect(made.statusCode).toBe(200);
    const secret = made.json().secret as string;
    const token = await idp.token('dana');
    await call(
      'POST',
      '/v1alpha1/keys?project=p1&token=hunter2',
      `${token}x`,
      { roles: ['viewer'] },
      rid('s-2'),
    );
    await t.app.audit.flush();
    const rows = await t.app.store.audit.list({}, { pageSize: 1000 });
    const text = JSON.stringify(rows.items);
    expect(rows.items.some((e) => e.requestId === 's-1')).toBe(true);
    expect(rows.items.some((e) => e.requestId === 's-2')).toBe(true);
    for (const s of [secret, keys.admin.secret, token, 'hunter2']) expect(text).not.toContain(s);
  });

  it('GET /v1alpha1/audit: admins only, their own project, filters and pages', async () => {
    await t.app.audit.flush();
    expect((await call('GET', '/v1alpha1/audit', keys.editor.secret)).statusCode).toBe(403);
    expect((await call('GET', '/v1alpha1/audit?project=p2', keys.admin.secret)).statusCode).toBe(
      403,
    );
    const mine = await call('GET', '/v1alpha1/audit?page_size=1000', keys.otherAdmin.secret);
    expect(mine.statusCode).toBe(200);
    expect(mine.json().entries.length).toBeGreaterThan(0);
    // Its own project's entries, and refusals that name no project (callers not yet known).
    for (const e of mine.json().entries) expect([undefined, 'p2']).toContain(e.project);
    expect(mine.json().entries.some((e: { project?: string }) => e.project === 'p1')).toBe(false);
    const denied = await call(
      'GET',
      '/v1alpha1/audit?outcome=denied&page_size=1000',
      keys.admin.secret,
    );
    const outcomes = new Set(denied.json().entries.map((e: { outcome: string }) => e.outcome));
    expect([...outcomes]).toEqual(['denied']);
    const first = await call('GET', '/v1alpha1/audit?page_size=2', keys.admin.secret);
    expect(first.json().entries).toHaveLength(2);
    const next = first.json().next_page_token as string;
    const second = await call(
      'GET',
      `/v1alpha1/audit?page_size=2&page_token=${next}`,
      keys.admin.secret,
    );
    const ids = (r: typeof first) => r.json().entries.map((e: { id: string }) => e.id);
    expect(ids(second)).toHaveLength(2);
    expect(ids(second).some((id: string) => ids(first).includes(id))).toBe(false);
    const bad = await call('GET', '/v1alpha1/audit?since=yesterday', keys.admin.secret);
    expect(bad.statusCode).toBe(400);
  });

  it('deletes entries past audit.retention', async () => {
    const old = new Date(Date.now() - 91 * 24 * 3600_000).toISOString();
    await t.app.store.audit.append([
      {
        id: 'aud_old',
        at: old,
        principal: 'key_gone',
        principalKind: 'key',
        action: 'POST /v1alpha1/policies',
        resource: '/v1alpha1/policies',
        project: 'p1',
        outcome: 'ok',
        status: 200,
        requestId: 'old',
      },
    ]);
    expect(await t.app.audit.sweep()).toBe(1);
    expect(await entriesOf('old')).toHaveLength(0);
    expect((await entriesOf('w-1')).length).toBe(1);
  });
});
