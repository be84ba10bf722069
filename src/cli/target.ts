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

/**
 * Calls `remote` with a client of the server `--server` / TOUCHSTONE_SERVER names, or, without
 * one, `local`, which works on the local data dir.
 */
export async function remoteOrLocal<T>(
  flags: { server?: string },
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: () => Promise<T>,
): Promise<T> {
  const server = flags.server ?? io.env.TOUCHSTONE_SERVER;
  if (server !== undefined && server !== '') {
    return remote(new ApiClient(server, io.env.TOUCHSTONE_API_KEY));
  }
  return local();
}

/** Runs against a server (`--server` / TOUCHSTONE_SERVER) or, without one, the local data dir. */
export function withTarget<T>(
  flags: TargetFlags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (store: Store) => Promise<T>,
): Promise<T> {
  return remoteOrLocal(flags, io, remote, async () => {
    const config = configFromFlags(flags, io);
    const store = await openStore(config, {
      clock: systemClock,
      logger: pino({ level: 'silent' }),
    });
    try {
      return await local(store);
    } finally {
      await store.close();
    }
  });
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

export interface ListPage<T> {
  items: T[];
  nextPageToken?: string | undefined;
}

/** Follows page tokens until the last page; `fetchPage` reads one page (server or local). */
export async function allPages<T>(
  fetchPage: (pageToken: string | undefined) => Promise<ListPage<T>>,
): Promise<T[]> {
  const all: T[] = [];
  let token: string | undefined;
  do {
    const page = await fetchPage(token);
    all.push(...page.items);
    token = page.nextPageToken;
  } while (token !== undefined);
  return all;
}

/** One page of a REST list (`GET path?project=&page_size=1000&page_token=`), items under `field`. */
export async function remotePage<T>(
  client: ApiClient,
  path: string,
  field: string,
  project: string | undefined,
  pageToken: string | undefined,
): Promise<ListPage<T>> {
  const q = new URLSearchParams({ page_size: '1000' });
  if (project !== undefined) q.set('project', project);
  if (pageToken !== undefined) q.set('page_token', pageToken);
  const body = await client.call<Record<string, unknown> & { next_page_token?: string }>(
    'GET',
    `${path}?${q}`,
  );
  return { items: (body[field] ?? []) as T[], nextPageToken: body.next_page_token };
}

/** The local page request matching `remotePage`. */
export function localPage(pageToken: string | undefined): { pageSize: number; pageToken?: string } {
  return { pageSize: 1000, ...(pageToken === undefined ? {} : { pageToken }) };
}
