import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentRun } from '../fakes/langfuse/samples.js';
import { LangfuseFake } from '../fakes/langfuse/server.js';
import {
  callJson,
  eventually,
  freePort,
  kill9,
  type RunningServer,
  serveArgs,
  startServer,
} from '../support/process.js';

/**
 * A scheduled source survives `kill -9`: a `touchstone serve` process evaluates a minutely window
 * of a Langfuse store (the contract fake) and is killed with SIGKILL as soon as the window's run
 * exists, mid-run; a new process on the same data dir goes on from the stored cursor. Every
 * window is evaluated exactly once (stable window ids), none is lost before its deadline, and the
 * run the dead process started finishes.
 */

const MIN = 60_000;
const END_LABEL = 'touchstone.dev/window-end';

interface RunListItem {
  id: string;
  status: string;
  labels: Record<string, string>;
}

describe('a scheduled source across kill -9', () => {
  let dir = '';
  let configFile = '';
  let fake: LangfuseFake;
  const running: RunningServer[] = [];

  const launch = async (): Promise<RunningServer> => {
    const port = await freePort();
    const server = await startServer(serveArgs(join(dir, 'data'), port, configFile), {
      LANGFUSE_KEY: fake.credential,
    });
    const r = { base: `http://127.0.0.1:${port}`, server };
    running.push(r);
    return r;
  };
  const windowRuns = async (base: string): Promise<RunListItem[]> =>
    ((await callJson(base, 'GET', '/v1alpha1/runs?page_size=100')).runs as RunListItem[]).filter(
      (r) => r.labels[END_LABEL] !== undefined,
    );

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-scheduled-crash-'));
    configFile = join(dir, 'config.yaml');
    writeFileSync(
      configFile,
      [
        'log_level: warn',
        'sources:',
        "  allow_hosts: ['127.0.0.1']",
        'credentials:',
        '  grants:',
        "    - {env: LANGFUSE_KEY, projects: [default], hosts: ['127.0.0.1']}",
        'runs:',
        '  lease_timeout: 2s',
        '',
      ].join('\n'),
    );
    fake = await LangfuseFake.start();
    // Two traces in every minute from now on (the test spans about three minutes).
    const first = Math.floor(Date.now() / MIN) * MIN;
    for (let m = 0; m < 6; m++) {
      fake.add(...agentRun(2 * m + 1, first + m * MIN + 10_000));
      fake.add(...agentRun(2 * m + 2, first + m * MIN + 20_000));
    }
  });
  afterAll(async () => {
    for (const r of running) await kill9(r);
    await fake?.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('evaluates each window once, and goes on from the stored cursor after a restart', async () => {
    const a = await launch();
    await callJson(a.base, 'POST', '/v1alpha1/sources', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: 'minutely' },
      spec: {
        connector: 'langfuse',
        endpoint: fake.url,
        locations: ['production'],
        credentials: { env: 'LANGFUSE_KEY' },
        schedule: { cron: '* * * * *', window: '1m', startingDeadline: '5m' },
        runSpec: { evaluators: [{ ref: 'tool-errors' }] },
      },
    });
    const [first] = await eventually(async () => {
      const runs = await windowRuns(a.base);
      return runs.length > 0 ? runs : undefined;
    }, 90_000);
    await kill9(a);

    const b = await launch();
    const runs = await eventually(async () => {
      const all = await windowRuns(b.base);
      return all.length >= 2 ? all : undefined;
    }, 120_000);
    const ends = runs.map((r) => Date.parse(r.labels[END_LABEL] as string)).sort((x, y) => x - y);
    // Once each, and consecutive from the first: no window twice, none lost.
    expect(new Set(ends).size).toBe(ends.length);
    expect(ends.map((e) => e - (ends[0] as number))).toEqual(ends.map((_, i) => i * MIN));
    // The run the killed process started finishes on the new one.
    const finished = await eventually(async () => {
      const run = await callJson(b.base, 'GET', `/v1alpha1/runs/${first?.id}`);
      return run.status === 'RUN_STATUS_SUCCEEDED' ? run : undefined;
    }, 60_000);
    expect(finished.progress.total).toBe(2);
    const source = await callJson(b.base, 'GET', '/v1alpha1/sources/minutely');
    expect(source.status).toMatchObject({ missedWindows: 0 });
    expect(source.status.lastRunId).toBeDefined();
    expect(fake.violations).toEqual([]);
  }, 300_000);
});
