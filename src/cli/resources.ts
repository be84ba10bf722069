import type { Command } from 'commander';
import type { LocalService } from '../app/index.js';
import type { Principal } from '../auth/index.js';
import type { Config } from '../config/index.js';
import type { Store } from '../store/index.js';
import type { ApiClient } from './client.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, describeError, readResources, table } from './io.js';
import { configFromFlags } from './serve.js';
import {
  allPages,
  type ListPage,
  type LocalKit,
  localPage,
  remotePage,
  type TargetFlags,
  targetOptions,
  withTarget,
} from './target.js';

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
 * local data dir's service (`localScope`), called as the local user (`caller`).
 */
export type ResourceScope<S> = <T>(
  flags: ResourceFlags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (service: S, caller: Principal) => Promise<T>,
) => Promise<T>;

/**
 * The scope of a resource whose local service the builder `pick` names (app/'s local builders,
 * from the local kit): against a server through `remote`, else on the local data dir through the
 * service the server uses.
 */
export function localScope<S>(
  pick: (kit: LocalKit) => (config: Config, store: Store, env: CliIO['env']) => LocalService<S>,
): ResourceScope<S> {
  return (flags, io, remote, local) =>
    withTarget(flags, io, remote, async (store, kit) => {
      const { service, close } = pick(kit)(configFromFlags(flags, io), store, io.env);
      try {
        return await local(service, kit.OPEN_PRINCIPAL);
      } finally {
        await close();
      }
    });
}

type NamedCall = (caller: Principal, project: string | undefined, name: string) => Promise<unknown>;

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
    (s, caller) => s[verb](caller, flags.project, name) as Promise<V>,
  );
}

interface Listing<V> {
  list(
    caller: Principal,
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
      (s, caller) => s.list(caller, flags.project, localPage(token)),
    ),
  );
  printResult(io, flags, all, table(headers, all.map(row)));
}

/** What a resource's local service offers the generic verbs (the kit's ResourceService does). */
export interface ResourceVerbsService<V, A> extends Listing<V> {
  apply(
    caller: Principal,
    input: unknown,
    options: { project?: string; validateOnly?: boolean },
  ): Promise<A>;
  get(caller: Principal, project: string | undefined, name: string): Promise<V>;
  delete(caller: Principal, project: string | undefined, name: string): Promise<V>;
}

/**
 * A resource's CLI: its words and how its answers print. The verbs `apply -f [--dry-run]`,
 * `list`, `get` and `delete` are built from it by resourceCommand; the resource adds only its own.
 */
export interface ResourceCli<V, A> {
  /** `policy`: the command's name and the resource's word in messages. */
  noun: string;
  /** `policies`: the REST path and list key. */
  plural: string;
  description: string;
  scope: ResourceScope<ResourceVerbsService<V, A>>;
  apply: {
    description: string;
    /** Help of `-f`, `-p` and `--dry-run`. */
    file: string;
    project: string;
    dryRun: string;
    /** One document per file, printed as the one answer (not a list of them). */
    oneDocument?: true;
    /** The line printed per applied document; `verb` is `valid`, `created` or `applied`. */
    line(applied: A, verb: string): string;
  };
  list: { description: string; headers: string[]; row(view: V): string[] };
  get: { description: string };
  delete: { description: string; line(deleted: V, name: string): string };
  /** Verbs that change the resource's state (`pause`, `resume`): listed before `delete`. */
  stateVerbs?(command: Command): void;
  /** The resource's other verbs (`rescore`, `test`, …): listed last. */
  verbs?(command: Command): void;
}

type ApplyFlags = ResourceFlags & { file: string; dryRun?: boolean };

/** `<noun> apply`: each document through the API (or the local service), printed a line each. */
async function applyVerb<V, A>(
  cli: ResourceCli<V, A>,
  io: CliIO,
  stdin: () => string,
  flags: ApplyFlags,
): Promise<void> {
  const apply = (doc: unknown) =>
    cli.scope(
      flags,
      io,
      (c) => c.call<A>('POST', `v1alpha1/${cli.plural}?${applyQuery(flags)}`, doc),
      (s, caller) =>
        s.apply(caller, doc, {
          ...(flags.project === undefined ? {} : { project: flags.project }),
          validateOnly: flags.dryRun === true,
        }),
    );
  const line = (applied: A) => {
    const created = (applied as { created?: boolean }).created;
    return cli.apply.line(applied, flags.dryRun ? 'valid' : created ? 'created' : 'applied');
  };
  if (cli.apply.oneDocument === undefined) {
    await applyDocuments(io, flags, stdin, apply, line);
    return;
  }
  const docs = readResources(flags.file, stdin);
  if (docs.length > 1) throw new CliExit(EXIT.USAGE, `${flags.file}: one ${cli.noun} per file`);
  const applied = await apply(docs[0]);
  printResult(io, flags, applied, line(applied));
}

/** The `<noun>` command with the verbs every resource has, then the resource's own. */
export function resourceCommand<V, A>(
  program: Command,
  io: CliIO,
  stdin: () => string,
  cli: ResourceCli<V, A>,
): Command {
  const command = program.command(cli.noun).description(cli.description);
  const named = (verb: string, description: string) =>
    targetOptions(
      command
        .command(verb)
        .description(description)
        .argument('<name>')
        .option('-p, --project <name>', 'project'),
    );

  targetOptions(
    command
      .command('apply')
      .description(cli.apply.description)
      .requiredOption('-f, --file <file>', cli.apply.file)
      .option('-p, --project <name>', cli.apply.project)
      .option('--dry-run', cli.apply.dryRun),
  ).action((flags: ApplyFlags) => applyVerb(cli, io, stdin, flags));

  targetOptions(
    command
      .command('list')
      .description(cli.list.description)
      .option('-p, --project <name>', 'project'),
  ).action((flags: ResourceFlags) =>
    listResources(cli.scope, flags, io, cli.plural, cli.list.headers, cli.list.row),
  );

  named('get', cli.get.description).action(async (name: string, flags: ResourceFlags) => {
    const got = await callNamed(cli.scope, flags, io, cli.plural, name, 'get');
    io.stdout.write(`${JSON.stringify(got, null, 2)}\n`);
  });

  cli.stateVerbs?.(command);

  named('delete', cli.delete.description).action(async (name: string, flags: ResourceFlags) => {
    const deleted = await callNamed(cli.scope, flags, io, cli.plural, name, 'delete');
    printResult(io, flags, deleted, cli.delete.line(deleted, name));
  });

  cli.verbs?.(command);
  return command;
}
