import { type AddressInfo, createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { testApp } from '../../test/support/app.js';
import { loadConfig } from '../config/index.js';
import type { Component } from '../core/index.js';
import { createJudgeHttpClient } from './index.js';

describe('the judge HTTP client', () => {
  const config = loadConfig({
    env: {},
    overrides: {
      judges: { local: { endpoint: 'http://127.0.0.1:9/v1', model: 'm' } },
    },
  });

  it('lets the configured judge host through and refuses other internal targets', async () => {
    const http = createJudgeHttpClient(config);
    try {
      // Port 9 (discard) is closed: the request gets past the guard and fails to connect.
      await expect(
        http.request({ method: 'GET', url: 'http://127.0.0.1:9/v1/models' }),
      ).rejects.toMatchObject({
        code: expect.not.stringMatching(/REFUSED/),
      });
      for (const url of [
        'http://10.0.0.1/v1',
        'http://169.254.169.254/latest',
        'http://localhost:9/v1',
      ]) {
        await expect(http.request({ method: 'GET', url })).rejects.toMatchObject({
          code: 'OUTBOUND_TARGET_REFUSED',
        });
      }
    } finally {
      await http.close();
    }
  });
});

describe("the app's components", () => {
  const build = (online: boolean) =>
    testApp({ listen: '127.0.0.1:0', online: { enabled: online } });

  it('are listed so the server stops first, then each worker before what it writes to', async () => {
    const t = await build(true);
    try {
      expect(t.app.components.map((c) => c.name)).toEqual([
        'store',
        'datasets',
        'source-http',
        'identity-provider-http',
        'judge-http',
        'webhooks',
        'audit',
        'idempotency-sweep',
        'run-retention',
        'run-executor',
        'write-backs',
        'source-manager',
        'policy-engine',
        'trace-completion',
        'http-server',
      ]);
    } finally {
      await t.close();
    }
  });

  it('are started in list order by listen() and stopped in reverse by close()', async () => {
    const t = await build(true);
    const log: string[] = [];
    // Each component recorded as it is started and stopped, in place in the list the app runs.
    const list = t.app.components as Component[];
    list.forEach((c, i) => {
      list[i] = {
        name: c.name,
        start: () => c.start().then(() => void log.push(`start:${c.name}`)),
        stop: () => c.stop().then(() => void log.push(`stop:${c.name}`)),
      };
    });
    try {
      const address = await t.app.listen();
      const names = list.map((c) => c.name);
      expect(log).toEqual(names.map((n) => `start:${n}`));
      expect((await fetch(`http://${address}/healthz`)).status).toBe(200);
      log.length = 0;
      await t.app.close();
      expect(log).toEqual(names.reverse().map((n) => `stop:${n}`));
      await expect(fetch(`http://${address}/healthz`)).rejects.toThrow();
      await expect(t.app.store.ping()).rejects.toThrow();
    } finally {
      await t.close();
    }
  });

  it('a listen that fails stops what it started: nothing is left running or open', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const { port } = taken.address() as AddressInfo;
    const t = await testApp({ listen: `127.0.0.1:${port}` });
    try {
      await expect(t.app.listen()).rejects.toMatchObject({ code: 'EADDRINUSE' });
      await expect(t.app.store.ping()).rejects.toThrow();
    } finally {
      await t.close();
      taken.close();
    }
  });

  it('close without listen stops every part, and twice is safe', async () => {
    const t = await build(false);
    await t.app.close();
    await t.app.close();
    await expect(t.app.store.ping()).rejects.toThrow();
    await t.close();
  });
});
