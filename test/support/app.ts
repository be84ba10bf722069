import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { type App, createApp } from '../../src/app/index.js';
import { loadConfig } from '../../src/config/index.js';

export interface TestApp {
  app: App;
  dataDir: string;
  close(): Promise<void>;
}

/** Builds an app on a fresh SQLite data dir (or PostgreSQL with store overrides); not listening. */
export async function testApp(
  overrides: Record<string, unknown> = {},
  env: Record<string, string> = {},
): Promise<TestApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-test-'));
  const config = loadConfig({
    env,
    overrides: { data_dir: dataDir, log_level: 'silent', ...overrides },
  });
  const app = await createApp(config, {
    env,
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
  return {
    app,
    dataDir,
    async close() {
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
