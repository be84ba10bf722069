import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL, ROLES, type Role } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { TestReceiver } from '../webhooks/receiver.testkit.js';

/** An app on a fresh SQLite dir whose log lines are kept, so tests can search them. */
async function loggedApp(overrides: Record<string, unknown> = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-webhooks-api-'));
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const config = loadConfig({
    env: {},
    overrides: {
      data_dir: dataDir,
      webhooks: { allow_hosts: ['127.0.0.1'] },
      ...overrides,
    },
  });
  const app = await createApp(config, {
    env: {},
    processMetrics: false,
    logger: pino({ level: 'debug' }, sink),
  });
  return {
    app,
    logs: () => lines.join(''),
    async close() {
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

type Method = 'GET' | 'POST' | 'DELETE';

function sender(app: () => App) {
  return (method: Method, url: string, body?: unknown, secret?: string) =>
    app().server.inject({
      method,
      url,
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(secret === undefined ? {} : { authorization: `Bearer ${secret}` }),
      },
    });
}

describe('webhooks API', () => {
  let t: Awaited<ReturnType<typeof loggedApp>>;
  let receiver: TestReceiver;
  const send = sender(() => t.app);

  beforeAll(async () => {
    t = await loggedApp();
    receiver = await TestReceiver.start();
  });
  afterAll(async () => {
    await receiver.close();
    await t.close();
  });
  beforeEach(async () => {
    receiver.received.length = 0;
    for (const w of (await send('GET', '/v1alpha1/webhooks')).json().webhooks) {
      await send('DELETE', `/v1alpha1/webhooks/${w.name}`);
    }
  });

  it('applies a webhook: the generated secret is returned once, and never again', async () => {
    const created = await send('POST', '/v1alpha1/webhooks', {
      name: 'ci',
      url: receiver.url,
      events: ['WEBHOOK_EVENT_RUN_FINISHED', 'run.gate_failed'],
    });
    expect(created.statusCode).toBe(200);
    const body = created.json();
    expect(body).toMatchObject({
      name: 'ci',
      project: 'default',
      url: receiver.url,
      events: ['WEBHOOK_EVENT_RUN_FINISHED', 'WEBHOOK_EVENT_RUN_GATE_FAILED'],
      disabled: false,
      secretSet: true,
    });
    expect(body.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const secret: string = body.secret;
    receiver.secret = secret;

    const got = await send('GET', '/v1alpha1/webhooks/ci');
    expect(got.statusCode).toBe(200);
    const { secret: _shownOnce, ...shown } = body;
    expect(got.json()).toStrictEqual(shown);
    const list = await send('GET', '/v1alpha1/webhooks');
    expect(list.json().webhooks).toHaveLength(1);

    // Re-applied without a secret: the stored one is kept and not shown.
    const again = await send('POST', '/v1alpha1/webhooks', { name: 'ci', url: receiver.url });
    expect(again.json().secret).toBeUndefined();
    expect(again.json().events).toEqual([]);
    const ping = await send('POST', '/v1alpha1/webhooks/ci:test');
    expect(ping.statusCode).toBe(200);
    await t.app.webhooks.dispatcher.tick();
    expect(receiver.received.map((r) => [r.event, r.verified])).toEqual([['ping', true]]);

    const deliveries = await send('GET', '/v1alpha1/webhooks/ci/deliveries');
    for (const res of [got, list, again, ping, deliveries]) expect(res.body).not.toContain(secret);
    expect(t.logs()).toContain('"action":"webhooks.apply"');
    expect(t.logs()).not.toContain(secret);
  });

  it('keeps a secret the caller sets without echoing it, and signs with it', async () => {
    const secret = 'my-own-secret-of-24-chars';
    const res = await send('POST', '/v1alpha1/webhooks', {
      name: 'own',
      url: receiver.url,
      secret,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().secret).toBeUndefined();
    expect(res.body).not.toContain(secret);
    receiver.secret = secret;
    await send('POST', '/v1alpha1/webhooks/own:test');
    await t.app.webhooks.dispatcher.tick();
    expect(receiver.received.map((r) => r.verified)).toEqual([true]);
  });

  it.each([
    [
      { name: 'x', url: 'https://example.com/', secret: 'short-secret' },
      'secret',
      /at least 16 characters/,
    ],
    [{ name: 'x', url: 'ftp://example.com/hook' }, 'url', /http or https/],
    [{ name: 'x', url: 'not a url' }, 'url', /absolute URL/],
    [{ name: 'x', url: 'https://user:pw@example.com/' }, 'url', /user:password/],
    [{ name: 'X Y', url: 'https://example.com/' }, 'name', /lowercase/],
    [{ name: 'x', url: 'https://example.com/', extra: 1 }, 'extra', /unknown field/],
  ])('refuses %j with 400 naming %s', async (body, path, message) => {
    const res = await send('POST', '/v1alpha1/webhooks', body);
    expect(res.statusCode).toBe(400);
    const err = res.json().error;
    expect(err.code).toBe('WEBHOOK_INVALID');
    expect(err.details).toEqual([{ path, message: expect.stringMatching(message) }]);
    expect(res.body).not.toContain('short-secret');
    expect(res.body).not.toContain(':pw@');
  });

  it('refuses unknown events with 400 naming each of them', async () => {
    const res = await send('POST', '/v1alpha1/webhooks', {
      name: 'x',
      url: 'https://example.com/',
      events: ['run.finished', 'WEBHOOK_EVENT_RUN_EXPLODED', 'ping', 'trace.scored'],
    });
    expect(res.statusCode).toBe(400);
    const err = res.json().error;
    expect(err.message).toContain('WEBHOOK_EVENT_RUN_EXPLODED');
    expect(err.message).toContain('"ping"');
    expect(err.details.map((d: { path: string }) => d.path)).toEqual(['events[1]', 'events[2]']);
  });

  it('refuses private and metadata URLs unless webhooks.allow_hosts lists them', async () => {
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://10.1.2.3/hook',
      'http://localhost:8080/hook',
      'http://[::ffff:127.0.0.2]/hook',
    ]) {
      const res = await send('POST', '/v1alpha1/webhooks', { name: 'x', url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('WEBHOOK_URL_REFUSED');
      expect(res.json().error.message).toContain('webhooks.allow_hosts');
    }
    // http to a public address is allowed (receivers behind a TLS-terminating proxy).
    expect(
      (await send('POST', '/v1alpha1/webhooks', { name: 'x', url: 'http://93.184.215.14/hook' }))
        .statusCode,
    ).toBe(200);
  });

  it('accepts the declarative form, and validate_only stores nothing', async () => {
    const resource = {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'Webhook',
      metadata: { name: 'pager', labels: { 'touchstone.dev/project': 'ops' } },
      spec: { url: receiver.url, events: ['alert.fired', 'alert.resolved'] },
    };
    const dry = await send('POST', '/v1alpha1/webhooks?validate_only=true', resource);
    expect(dry.statusCode).toBe(200);
    expect(dry.json()).toMatchObject({ name: 'pager', project: 'ops' });
    expect(dry.json().secret).toBeUndefined();
    expect((await send('GET', '/v1alpha1/webhooks/pager?project=ops')).statusCode).toBe(404);
    const applied = await send('POST', '/v1alpha1/webhooks', resource);
    expect(applied.json()).toMatchObject({
      project: 'ops',
      events: ['WEBHOOK_EVENT_ALERT_FIRED', 'WEBHOOK_EVENT_ALERT_RESOLVED'],
    });
    expect((await send('GET', '/v1alpha1/webhooks/pager?project=ops')).statusCode).toBe(200);
    const bad = await send('POST', '/v1alpha1/webhooks', {
      ...resource,
      spec: { ...resource.spec, secret: 'tiny' },
    });
    expect(bad.json().error.details).toEqual([
      { path: 'spec.secret', message: expect.stringContaining('16') },
    ]);
    await send('DELETE', '/v1alpha1/webhooks/pager?project=ops');
  });

  it('routes the :test verb as a literal colon, encoded or not', async () => {
    await send('POST', '/v1alpha1/webhooks', { name: 'a.b-c', url: receiver.url });
    expect((await send('POST', '/v1alpha1/webhooks/a.b-c:test')).json()).toMatchObject({
      webhook: 'a.b-c',
      event: 'ping',
      state: 'PENDING',
      attempts: 0,
    });
    expect((await send('POST', '/v1alpha1/webhooks/a.b-c%3Atest')).statusCode).toBe(200);
    expect((await send('POST', '/v1alpha1/webhooks/a.b-c:pause')).json().error.code).toBe(
      'ROUTE_NOT_FOUND',
    );
    expect((await send('POST', '/v1alpha1/webhooks/nope:test')).json().error.code).toBe(
      'WEBHOOK_NOT_FOUND',
    );
    expect((await send('GET', '/v1alpha1/webhooks/a.b-c')).json().name).toBe('a.b-c');
  });

  it('refuses to test a disabled webhook; lists deliveries newest first, paged', async () => {
    await send('POST', '/v1alpha1/webhooks', { name: 'off', url: receiver.url, disabled: true });
    const off = await send('POST', '/v1alpha1/webhooks/off:test');
    expect(off.statusCode).toBe(400);
    expect(off.json().error.code).toBe('WEBHOOK_DISABLED');

    await send('POST', '/v1alpha1/webhooks', { name: 'on', url: receiver.url });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await send('POST', '/v1alpha1/webhooks/on:test')).json().id);
    await t.app.webhooks.dispatcher.tick();
    const p1 = (await send('GET', '/v1alpha1/webhooks/on/deliveries?page_size=2')).json();
    expect(p1.deliveries.map((d: { id: string }) => d.id)).toEqual([ids[2], ids[1]]);
    expect(p1.deliveries[0]).toStrictEqual({
      id: ids[2],
      webhook: 'on',
      event: 'ping',
      state: 'DELIVERED',
      attempts: 1,
      lastStatus: 204,
      createdAt: expect.any(String),
      finishedAt: expect.any(String),
    });
    const p2 = (
      await send(
        'GET',
        `/v1alpha1/webhooks/on/deliveries?page_size=2&page_token=${p1.next_page_token}`,
      )
    ).json();
    expect(p2.deliveries.map((d: { id: string }) => d.id)).toEqual([ids[0]]);
    expect(p2.next_page_token).toBeUndefined();
    expect((await send('GET', '/v1alpha1/webhooks/gone/deliveries')).statusCode).toBe(404);
  });

  it('deletes a webhook', async () => {
    await send('POST', '/v1alpha1/webhooks', { name: 'bye', url: receiver.url });
    const del = await send('DELETE', '/v1alpha1/webhooks/bye');
    expect(del.statusCode).toBe(200);
    expect(del.json()).toMatchObject({ name: 'bye', secretSet: true });
    expect(del.json().secret).toBeUndefined();
    expect((await send('GET', '/v1alpha1/webhooks/bye')).statusCode).toBe(404);
    expect((await send('DELETE', '/v1alpha1/webhooks/bye')).statusCode).toBe(404);
  });

  it('exposes attempts by outcome, queue depth and oldest pending age on /metrics', async () => {
    const delivered = async () => {
      const text = (await send('GET', '/metrics')).body;
      for (const outcome of ['delivered', 'retry', 'failed']) {
        expect(text).toMatch(
          new RegExp(`^touchstone_webhook_attempts_total\\{outcome="${outcome}"\\} \\d+`, 'm'),
        );
      }
      return Number(
        /^touchstone_webhook_attempts_total\{outcome="delivered"\} (\d+)/m.exec(text)?.[1],
      );
    };
    await t.app.webhooks.dispatcher.tick();
    const before = await delivered();
    await send('POST', '/v1alpha1/webhooks', { name: 'm', url: receiver.url });
    await send('POST', '/v1alpha1/webhooks/m:test');
    let text = (await send('GET', '/metrics')).body;
    expect(text).toMatch(/^touchstone_webhook_queue_depth 1$/m);
    expect(text).toMatch(/^touchstone_webhook_oldest_pending_age_seconds \d/m);
    await t.app.webhooks.dispatcher.tick();
    expect(await delivered()).toBe(before + 1);
    text = (await send('GET', '/metrics')).body;
    expect(text).toMatch(/^touchstone_webhook_queue_depth 0$/m);
  });
});

describe('webhooks API permissions (auth on)', () => {
  let t: Awaited<ReturnType<typeof loggedApp>>;
  const send = sender(() => t.app);
  const secrets = {} as Record<Role, string>;
  let otherProject: string;

  beforeAll(async () => {
    t = await loggedApp({ auth: {} });
    for (const role of ROLES) {
      secrets[role] = (
        await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: [role], name: role })
      ).secret;
    }
    otherProject = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p2', roles: ['owner'] }))
      .secret;
    await t.app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'hook',
      project: 'p1',
      url: 'https://example.com/hook',
    });
  });
  afterAll(() => t.close());

  const calls: { name: string; method: Method; url: string; body?: unknown; write: boolean }[] = [
    {
      name: 'apply',
      method: 'POST',
      url: '/v1alpha1/webhooks',
      body: { name: 'hook', url: 'https://example.com/hook' },
      write: true,
    },
    { name: 'list', method: 'GET', url: '/v1alpha1/webhooks', write: false },
    { name: 'get', method: 'GET', url: '/v1alpha1/webhooks/hook', write: false },
    { name: 'test', method: 'POST', url: '/v1alpha1/webhooks/hook:test', write: true },
    { name: 'deliveries', method: 'GET', url: '/v1alpha1/webhooks/hook/deliveries', write: false },
    { name: 'delete', method: 'DELETE', url: '/v1alpha1/webhooks/hook', write: true },
  ];

  for (const call of calls) {
    for (const role of ROLES) {
      const allowed = role === 'admin' || role === 'owner';
      it(`${call.name} as ${role}: ${allowed ? 'allowed' : '403'}`, async () => {
        const res = await send(call.method, call.url, call.body, secrets[role]);
        expect(res.statusCode, res.body).toBe(allowed ? 200 : 403);
        if (!allowed) {
          expect(res.json().error.message).toContain(
            call.write ? 'webhooks.write' : 'webhooks.read',
          );
        }
        if (call.name === 'delete' && allowed) {
          await t.app.webhooks.service.apply(OPEN_PRINCIPAL, {
            name: 'hook',
            project: 'p1',
            url: 'https://example.com/hook',
          });
        }
      });
    }
    it(`${call.name}: 401 without a key, 403 for another project's key`, async () => {
      expect((await send(call.method, call.url, call.body)).statusCode).toBe(401);
      const res = await send(
        call.method,
        `${call.url}${call.url.includes('?') ? '&' : '?'}project=p1`,
        call.body,
        otherProject,
      );
      expect(res.statusCode).toBe(403);
    });
  }

  it('audits writes with the principal, never the secret, and denied writes too', async () => {
    const secret = 'audit-me-secret-1234567890';
    await send(
      'POST',
      '/v1alpha1/webhooks',
      { name: 'aud', url: 'https://example.com/a', secret },
      secrets.admin,
    );
    await send('DELETE', '/v1alpha1/webhooks/aud', undefined, secrets.viewer);
    const audit = t
      .logs()
      .split('\n')
      .filter((l) => l.includes('"audit"') && l.includes('"aud"'))
      .map((l) => JSON.parse(l).audit);
    expect(audit).toEqual([
      {
        principal: expect.stringMatching(/^key_/),
        action: 'webhooks.apply',
        project: 'p1',
        webhook: 'aud',
      },
      {
        principal: expect.stringMatching(/^key_/),
        action: 'webhooks.delete',
        project: 'p1',
        webhook: 'aud',
      },
    ]);
    expect(t.logs()).toContain('"outcome":"refused"');
    expect(t.logs()).not.toContain(secret);
  });
});
