import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  createKey,
  freePort,
  type RunningServer,
  serveArgs,
  startServer,
} from '../support/process.js';

/**
 * The `touchstone serve` process the operator and its admission webhook talk to: API keys on,
 * loopback allowed for sources and webhooks, the credential `LANGFUSE_KEY` granted to `project`;
 * and an admin key of that project for the operator.
 */
export async function startOperatorServer(
  dir: string,
  project: string,
  langfuseCredential: string,
): Promise<{ server: RunningServer; key: string }> {
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
      LANGFUSE_KEY: langfuseCredential,
    }),
  };
  return { server, key };
}
