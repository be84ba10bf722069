import type { Command } from 'commander';
import { loadConfig } from '../config/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, describeError } from './io.js';

export interface ServerFlags {
  config?: string;
  listen?: string;
  dataDir?: string;
  auth?: boolean;
}

/** Loads config from file, env and the flags every server-side command shares. */
export function configFromFlags(flags: ServerFlags, io: CliIO) {
  return loadConfig({
    ...(flags.config === undefined ? {} : { file: flags.config }),
    env: io.env,
    overrides: {
      ...(flags.listen === undefined ? {} : { listen: flags.listen }),
      ...(flags.dataDir === undefined ? {} : { data_dir: flags.dataDir }),
      ...(flags.auth === false ? { no_auth: true } : {}),
    },
  });
}

export function serveCommand(program: Command, io: CliIO, done: (code: number) => void): void {
  program
    .command('serve')
    .description(
      'Start the Touchstone server (SQLite in ./.touchstone on 127.0.0.1:4318 by default).',
    )
    .option('-c, --config <file>', 'YAML config file')
    .option('--listen <host:port>', 'address to listen on (default 127.0.0.1:4318)')
    .option(
      '--data-dir <dir>',
      'data directory for the embedded SQLite database (default ./.touchstone)',
    )
    .option('--no-auth', 'run without authentication even on a non-loopback address')
    .action(async (flags: ServerFlags) => {
      let config: ReturnType<typeof configFromFlags>;
      try {
        config = configFromFlags(flags, io);
      } catch (err) {
        // A server that cannot start is an operational failure (exit 1), as process managers expect.
        throw new CliExit(EXIT.ERROR, describeError(err).text);
      }
      const { authRequired, createApp } = await import('../app/index.js');
      const app = await createApp(config, { env: io.env });
      const address = await app.listen();
      const storeText =
        config.store.driver === 'sqlite' ? `SQLite in ${config.data_dir}` : 'PostgreSQL';
      const authText = authRequired(config) ? 'API keys required' : 'no auth (open)';
      io.stdout.write(`touchstone listening on http://${address} — ${storeText}, ${authText}\n`);
      io.onShutdownSignal(async (signal) => {
        app.logger.info({ signal }, 'shutting down');
        await app.close();
        done(EXIT.OK);
      });
    });
}
