import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentRun } from '../fakes/langfuse/samples.js';
import { LangfuseFake } from '../fakes/langfuse/server.js';
import {
  createKey,
  freePort,
  kill9,
  type RunningServer,
  serveArgs,
  startServer,
} from '../support/process.js';

/**
 * What the operator's tests reconcile against: a real `touchstone serve` process with API keys
 * on, whose project may pull from the Langfuse contract fake (three agent runs in it), and an
 * admin key of that project for the operator and the assertions.
 */

type Json = Record<string, unknown>;

export interface OperatorServer {
  server: RunningServer;
  langfuse: LangfuseFake;
  /** An admin API key of the project. */
  key: string;
  /** A TraceSource spec pulling from the Langfuse fake every second, scored by these policies. */
  sourceSpec(policies: string[]): Json;
  /** A call to the server with that key. */
  api(method: string, path: string): Promise<{ status: number; body: Json }>;
  close(): Promise<void>;
}

export async function startOperatorServer(dir: string, project: string): Promise<OperatorServer> {
  const langfuse = await LangfuseFake.start();
  const now = Date.now();
  for (let i = 1; i <= 3; i++) langfuse.add(...agentRun(i, now - i * 60_000));
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    [
      'log_level: warn',
      'auth: {}',
      'sources:',
      "  allow_hosts: ['127.0.0.1']",
      'webhooks:',
      "  allow_hosts: ['127.0.0.1']",
      'credentials:',
      '  grants:',
      `    - {env: LANGFUSE_KEY, projects: [${project}], hosts: ['127.0.0.1']}`,
      '',
    ].join('\n'),
  );
  const data = join(dir, 'data');
  const key = createKey(data, project, 'admin');
  const port = await freePort();
  const server = {
    base: `http://127.0.0.1:${port}`,
    server: await startServer(serveArgs(data, port, config), {
      LANGFUSE_KEY: langfuse.credential,
    }),
  };
  return {
    server,
    langfuse,
    key,
    sourceSpec: (policies) => ({
      connector: 'langfuse',
      endpoint: langfuse.url,
      locations: ['production'],
      credentials: { env: 'LANGFUSE_KEY' },
      backfill: { since: '24h' },
      poll: { interval: '1s' },
      policies,
    }),
    async api(method, path) {
      const res = await fetch(`${server.base}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}` },
      });
      return { status: res.status, body: (await res.json()) as Json };
    },
    async close() {
      await kill9(server);
      await langfuse.close();
    },
  };
}
