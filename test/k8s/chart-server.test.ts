import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, kill9, launchServer, type RunningServer } from '../support/process.js';
import { render } from './helm.js';

/**
 * The config file the chart renders runs a real server: the first key is made as the chart's
 * notes say (`touchstone keys create --config …`), the server starts with auth on, answers its
 * probes, and takes the key. Only the address and data directory differ from the pod (flags: a
 * test server binds loopback and a temporary directory).
 */

const dir = mkdtempSync(join(tmpdir(), 'touchstone-chart-server-'));
let running: RunningServer | undefined;
afterAll(async () => {
  await kill9(running);
  rmSync(dir, { recursive: true, force: true });
});

describe('the rendered server config', () => {
  it('starts a server with auth on, whose probes answer and whose first key works', async () => {
    const { objects } = render(['-f', 'test/k8s/values/sqlite.yaml']);
    const configMap = objects.find((o) => o.kind === 'ConfigMap') as unknown as {
      data: { 'config.yaml': string };
    };
    const config = join(dir, 'config.yaml');
    writeFileSync(config, configMap.data['config.yaml']);
    const data = join(dir, 'data');

    const made = cli([
      'keys',
      'create',
      '--config',
      config,
      '--data-dir',
      data,
      '--project',
      'default',
      '--role',
      'owner',
      '--json',
    ]);
    expect(made.code, made.stderr).toBe(0);
    const key = JSON.parse(made.stdout).secret as string;

    running = await launchServer(data, config);
    expect(running.server.output()).toContain('API keys required');
    const { base } = running;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const list = `${base}/v1alpha1/sources?project=default`;
    expect((await fetch(list)).status).toBe(401);
    const authed = await fetch(list, { headers: { authorization: `Bearer ${key}` } });
    expect(authed.status).toBe(200);
  });
});
