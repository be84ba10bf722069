import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { splitListen } from '../config/index.js';
import type { Store } from '../store/index.js';
import { ApiClient } from './client.js';
import { credentialsPath, storedSignIn } from './credentials-file.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO } from './io.js';
import { configFromFlags, type ServerFlags } from './serve.js';

export interface TargetFlags extends ServerFlags {
  server?: string;
  json?: boolean;
}

/**
 * `--server` (or TOUCHSTONE_SERVER) as a URL. Without a scheme, `host:port` means
 * `http://host:port`, or `https://host` when the port is 443.
 */
export function serverUrl(raw: string, source = '--server'): string {
  const schemed = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw);
  let url: URL;
  try {
    url = new URL(schemed ? raw : `http://${raw}`);
  } catch {
    throw new CliExit(
      EXIT.USAGE,
      `${source} is not a URL: expected http://HOST:PORT, https://HOST or HOST:PORT`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliExit(EXIT.USAGE, `${source} must be an http:// or https:// URL`);
  }
  if (!schemed && url.port === '443') url.protocol = 'https:';
  return url.href.replace(/\/$/, '');
}

/** The URL `--server` or TOUCHSTONE_SERVER names; undefined when neither does. */
export function namedServerUrl(flags: { server?: string }, io: CliIO): string | undefined {
  const raw = flags.server ?? io.env.TOUCHSTONE_SERVER;
  if (raw === undefined || raw === '') return undefined;
  return serverUrl(raw, flags.server === undefined ? 'TOUCHSTONE_SERVER' : '--server');
}

/** A client of the server `--server` or TOUCHSTONE_SERVER names; undefined when neither does. */
export function namedServer(flags: { server?: string }, io: CliIO): ApiClient | undefined {
  const url = namedServerUrl(flags, io);
  return url === undefined ? undefined : clientFor(url, io);
}

/**
 * A client of `server` sending TOUCHSTONE_API_KEY or, without one, the sign-in stored for that
 * server by `touchstone login` (an explicit key wins).
 */
export function clientFor(server: string, io: CliIO): ApiClient {
  const key = io.env.TOUCHSTONE_API_KEY;
  if (key !== undefined && key !== '') return new ApiClient(server, { token: key });
  const stored = storedSignIn(credentialsPath(io.env), server);
  return new ApiClient(
    server,
    stored === undefined
      ? undefined
      : {
          token: stored.id_token,
          signIn: { issuer: stored.issuer, expiresAt: new Date(stored.expires_at) },
        },
  );
}

/** Where the local server answers: the configured listen address, loopback for a wildcard. */
function localServerUrl(listen: string): string {
  const { host, port } = splitListen(listen);
  const reachable = host === '' || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

/** Whether a Touchstone server answers `/healthz` at `url` (a refused connection fails at once). */
async function answersAsTouchstone(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) });
    const body = (await res.json()) as { service?: unknown };
    return res.ok && body.service === 'touchstone';
  } catch {
    return false;
  }
}

/**
 * The server a command without `--server` talks to, if any. A data dir the user named (flag,
 * config file, TOUCHSTONE_DATA_DIR, or another store) is used as it is. The default one
 * (`./.touchstone`) is named on stderr, since it depends on the working directory; when it holds
 * no database, a server answering at the configured listen address (127.0.0.1:4318 unless set)
 * is used instead, so a command run outside the server's directory does not read an empty one.
 */
async function implicitTarget(flags: TargetFlags, io: CliIO): Promise<ApiClient | undefined> {
  const named = namedServer(flags, io);
  if (named !== undefined) return named;
  if (
    flags.dataDir !== undefined ||
    flags.config !== undefined ||
    io.env.TOUCHSTONE_DATA_DIR !== undefined
  ) {
    return undefined;
  }
  const config = configFromFlags(flags, io);
  if (config.store.driver !== 'sqlite') return undefined;
  const { SQLITE_FILE_NAME } = await import('../store/index.js');
  const dir = resolve(config.data_dir);
  if (existsSync(join(dir, SQLITE_FILE_NAME))) {
    io.stderr.write(`touchstone: no --server given; using the data dir ${dir}\n`);
    return undefined;
  }
  const url = localServerUrl(config.listen);
  if (await answersAsTouchstone(url)) {
    io.stderr.write(
      `touchstone: no --server given and no data dir here; using the server running at ${url}\n`,
    );
    return clientFor(url, io);
  }
  io.stderr.write(
    `touchstone: no --server given and no server at ${url}; using a new data dir ${dir}\n`,
  );
  return undefined;
}

/** A command's choice of target, made once even when it calls the target page by page. */
const chosen = new WeakMap<object, Promise<ApiClient | undefined>>();

/**
 * Calls `remote` with a client of the server `--server` / TOUCHSTONE_SERVER names, or, without
 * one, `local`, which works on the local data dir (see `implicitTarget`).
 */
export async function remoteOrLocal<T>(
  flags: TargetFlags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: () => Promise<T>,
): Promise<T> {
  let target = chosen.get(flags);
  if (target === undefined) {
    target = implicitTarget(flags, io);
    chosen.set(flags, target);
  }
  const client = await target;
  return client === undefined ? local() : remote(client);
}

/** What local work is done with (`./local.js`), loaded only by commands that go local. */
export type LocalKit = typeof import('./local.js');

/**
 * Runs against a server (`--server` / TOUCHSTONE_SERVER) or, without one, on the local data dir's
 * store, with the local kit (the local user acts as `kit.OPEN_PRINCIPAL`: it owns the data dir).
 */
export function withTarget<T>(
  flags: TargetFlags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (store: Store, kit: LocalKit) => Promise<T>,
): Promise<T> {
  return remoteOrLocal(flags, io, remote, async () => {
    const config = configFromFlags(flags, io);
    const kit = await import('./local.js');
    const store = await kit.openLocalStore(config);
    try {
      return await local(store, kit);
    } finally {
      await store.close();
    }
  });
}

export function targetOptions(cmd: Command): Command {
  return cmd
    .option(
      '--server <url>',
      'server URL or HOST:PORT (default: $TOUCHSTONE_SERVER; without one, the local data dir)',
    )
    .option('-c, --config <file>', 'YAML config file (local mode)')
    .option('--data-dir <dir>', 'data directory (local mode, default ./.touchstone)')
    .option('--json', 'print JSON')
    .addOption(outputOption());
}

/**
 * `-o json|text`, the kubectl-style spelling of `--json` (text, the default, is the human view);
 * the program's preAction hook (`applyOutputOption`) turns `-o json` into the `json` flag.
 */
export function outputOption(): Option {
  return new Option('-o, --output <format>', 'output format (json: as --json)').choices([
    'json',
    'text',
  ]);
}

export function applyOutputOption(_program: Command, action: Command): void {
  if (action.getOptionValue('output') === 'json') action.setOptionValue('json', true);
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
