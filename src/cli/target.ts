import type { Command } from 'commander';
import { pino } from 'pino';
import { systemClock } from '../core/index.js';
import { openStore, type Store } from '../store/index.js';
import { ApiClient } from './client.js';
import type { CliIO } from './io.js';
import { configFromFlags, type ServerFlags } from './serve.js';

export interface TargetFlags extends ServerFlags {
  server?: string;
  json?: boolean;
}

/** Runs against a server (`--server` / TOUCHSTONE_SERVER) or, without one, the local data dir. */
export async function withTarget<T>(
  flags: TargetFlags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (store: Store) => Promise<T>,
): Promise<T> {
  const server = flags.server ?? io.env.TOUCHSTONE_SERVER;
  if (server !== undefined && server !== '') {
    return remote(new ApiClient(server, io.env.TOUCHSTONE_API_KEY));
  }
  const config = configFromFlags(flags, io);
  const store = await openStore(config, { clock: systemClock, logger: pino({ level: 'silent' }) });
  try {
    return await local(store);
  } finally {
    await store.close();
  }
}

export function targetOptions(cmd: Command): Command {
  return cmd
    .option(
      '--server <url>',
      'server URL (default: $TOUCHSTONE_SERVER; without one, the local data dir)',
    )
    .option('-c, --config <file>', 'YAML config file (local mode)')
    .option('--data-dir <dir>', 'data directory (local mode, default ./.touchstone)')
    .option('--json', 'print JSON');
}
