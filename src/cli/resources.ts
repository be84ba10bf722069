import { OPEN_PRINCIPAL } from '../auth/index.js';
import type { ApiClient } from './client.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, describeError, readResources, table } from './io.js';
import { allPages, type ListPage, localPage, remotePage, type TargetFlags } from './target.js';

/**
 * What the resource commands (policy, source, webhook, runs) share: the REST path of one resource,
 * printing (text or `--json`), and applying every document of a file.
 */

export interface ResourceFlags extends TargetFlags {
  project?: string;
}

/** `v1alpha1/<plural>/<name><suffix>?project=…` */
export function resourcePath(
  plural: string,
  name: string,
  flags: ResourceFlags,
  suffix = '',
  query: Record<string, string> = {},
): string {
  const q = new URLSearchParams(query);
  if (flags.project !== undefined) q.set('project', flags.project);
  const qs = q.toString();
  return `v1alpha1/${plural}/${encodeURIComponent(name)}${suffix}${qs === '' ? '' : `?${qs}`}`;
}

/** The apply query: `project` and, for a dry run, `validate_only`. */
export function applyQuery(flags: ResourceFlags & { dryRun?: boolean }): URLSearchParams {
  return new URLSearchParams({
    ...(flags.project === undefined ? {} : { project: flags.project }),
    ...(flags.dryRun ? { validate_only: 'true' } : {}),
  });
}

export function printResult(
  io: CliIO,
  flags: { json?: boolean },
  value: unknown,
  text: string,
): void {
  io.stdout.write(flags.json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}

/**
 * Applies each document of a file on its own: a bad one is reported with its document number and
 * does not stop the others; the command then exits with a usage error. One document: its error
 * is the command's.
 */
export async function applyDocuments<T>(
  io: CliIO,
  flags: ResourceFlags & { file: string },
  stdin: () => string,
  apply: (doc: unknown) => Promise<T>,
  line: (applied: T) => string,
): Promise<void> {
  const docs = readResources(flags.file, stdin);
  const applied: T[] = [];
  const failures: string[] = [];
  for (const [i, doc] of docs.entries()) {
    try {
      applied.push(await apply(doc));
    } catch (err) {
      if (docs.length === 1) throw err;
      failures.push(`document ${i + 1}: ${describeError(err).text}`);
    }
  }
  printResult(io, flags, applied, applied.map(line).join('\n'));
  if (failures.length > 0) throw new CliExit(EXIT.USAGE, failures.join('\n'));
}

/**
 * How a resource command reaches its resources: `remote` against a server, or `local` on the
 * local data dir's service (`withPolicies`, `withRuns`, …).
 */
export type ResourceScope<S> = <T>(
  flags: ResourceFlags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (service: S) => Promise<T>,
) => Promise<T>;

type NamedCall = (
  caller: typeof OPEN_PRINCIPAL,
  project: string | undefined,
  name: string,
) => Promise<unknown>;

/**
 * One call on the named resource: `get` and `delete` are GET and DELETE on its path, any other
 * verb the custom method `POST <path>:<verb>`; locally, the service's method of the same name.
 */
export function callNamed<K extends string, S extends Record<K, NamedCall>>(
  scope: ResourceScope<S>,
  flags: ResourceFlags,
  io: CliIO,
  plural: string,
  name: string,
  verb: K,
): Promise<Awaited<ReturnType<S[K]>>> {
  type V = Awaited<ReturnType<S[K]>>;
  const [method, suffix] =
    verb === 'get' ? ['GET', ''] : verb === 'delete' ? ['DELETE', ''] : ['POST', `:${verb}`];
  return scope(
    flags,
    io,
    (c) => c.call<V>(method, resourcePath(plural, name, flags, suffix)),
    (s) => s[verb](OPEN_PRINCIPAL, flags.project, name) as Promise<V>,
  );
}

interface Listing<V> {
  list(
    caller: typeof OPEN_PRINCIPAL,
    project: string | undefined,
    page: ReturnType<typeof localPage>,
  ): Promise<ListPage<V>>;
}

/** `<resource> list`: every page of `v1alpha1/<plural>`, printed as a table (or `--json`). */
export async function listResources<V>(
  scope: ResourceScope<Listing<V>>,
  flags: ResourceFlags,
  io: CliIO,
  plural: string,
  headers: string[],
  row: (item: V) => string[],
): Promise<void> {
  const all = await allPages<V>((token) =>
    scope(
      flags,
      io,
      (c) => remotePage<V>(c, `v1alpha1/${plural}`, plural, flags.project, token),
      (s) => s.list(OPEN_PRINCIPAL, flags.project, localPage(token)),
    ),
  );
  printResult(io, flags, all, table(headers, all.map(row)));
}
