import type { Command } from 'commander';
import type { ApiKey, KeyService, Principal } from '../auth/index.js';
import { ROLES, type Role } from '../core/index.js';
import type { ApiClient } from './client.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, table } from './io.js';
import {
  allPages,
  localPage,
  remotePage,
  type TargetFlags,
  targetOptions,
  withTarget,
} from './target.js';

/** Runs against a server or the local data dir (see withTarget). */
function withKeys<T>(
  flags: TargetFlags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (keys: KeyService, caller: Principal) => Promise<T>,
): Promise<T> {
  return withTarget(flags, io, remote, (store, kit) =>
    local(new kit.KeyService({ keys: store.keys, clock: kit.systemClock }), kit.OPEN_PRINCIPAL),
  );
}

function keyRow(k: ApiKey): string[] {
  return [
    k.id,
    k.project,
    k.roles.join(','),
    k.name,
    k.prefix,
    k.revokedAt === undefined ? 'active' : 'revoked',
    k.createdAt,
  ];
}

export function keysCommand(program: Command, io: CliIO): void {
  const keys = program.command('keys').description('Create, list and revoke API keys.');

  targetOptions(
    keys
      .command('create')
      .description('Create an API key; its secret is printed once.')
      .requiredOption('-p, --project <name>', 'project the key belongs to')
      .option('-r, --role <role...>', `roles (${ROLES.join(', ')})`, ['editor'])
      .option('-n, --name <name>', 'a name to recognise the key by')
      .option('-l, --label <key=value...>', 'labels applied to traces ingested with this key')
      .option('--expires-at <time>', 'RFC 3339 expiry time'),
  ).action(
    async (
      flags: TargetFlags & {
        project: string;
        role: string[];
        name?: string;
        label?: string[];
        expiresAt?: string;
      },
    ) => {
      const labels: Record<string, string> = {};
      for (const pair of flags.label ?? []) {
        const i = pair.indexOf('=');
        if (i <= 0) throw new CliExit(EXIT.USAGE, `--label ${pair}: expected key=value`);
        labels[pair.slice(0, i)] = pair.slice(i + 1);
      }
      for (const role of flags.role) {
        if (!(ROLES as readonly string[]).includes(role)) {
          throw new CliExit(EXIT.USAGE, `--role ${role}: expected one of ${ROLES.join(', ')}`);
        }
      }
      const request = {
        project: flags.project,
        roles: flags.role as Role[],
        ...(flags.name === undefined ? {} : { name: flags.name }),
        ...(Object.keys(labels).length === 0 ? {} : { labels }),
        ...(flags.expiresAt === undefined ? {} : { expiresAt: flags.expiresAt }),
      };
      const created = await withKeys(
        flags,
        io,
        (c) => c.call<{ key: ApiKey; secret: string }>('POST', 'v1alpha1/keys', request),
        (k, caller) => k.create(caller, request),
      );
      if (flags.json) {
        io.stdout.write(`${JSON.stringify(created, null, 2)}\n`);
        return;
      }
      io.stdout.write(
        `created key ${created.key.id} (project ${created.key.project}, roles ${created.key.roles.join(',')})\n` +
          `secret: ${created.secret}\n` +
          'Store the secret now: it is not shown again. Send it as "Authorization: Bearer <secret>".\n',
      );
    },
  );

  targetOptions(
    keys
      .command('list')
      .description('List API keys (never their secrets).')
      .option('-p, --project <name>', 'only this project'),
  ).action(async (flags: TargetFlags & { project?: string }) => {
    const all = await allPages<ApiKey>((token) =>
      withKeys(
        flags,
        io,
        (c) => remotePage<ApiKey>(c, 'v1alpha1/keys', 'keys', flags.project, token),
        (k, caller) => k.list(caller, flags.project, localPage(token)),
      ),
    );
    io.stdout.write(
      flags.json
        ? `${JSON.stringify(all, null, 2)}\n`
        : `${table(['ID', 'PROJECT', 'ROLES', 'NAME', 'PREFIX', 'STATE', 'CREATED'], all.map(keyRow))}\n`,
    );
  });

  targetOptions(
    keys.command('revoke').description('Revoke an API key.').argument('<id>', 'key id (key_…)'),
  ).action(async (id: string, flags: TargetFlags) => {
    const revoked = await withKeys(
      flags,
      io,
      (c) =>
        c
          .call<{ key: ApiKey }>('DELETE', `v1alpha1/keys/${encodeURIComponent(id)}`)
          .then((r) => r.key),
      (k, caller) => k.revoke(caller, id),
    );
    io.stdout.write(
      flags.json ? `${JSON.stringify(revoked, null, 2)}\n` : `revoked key ${revoked.id}\n`,
    );
  });
}
