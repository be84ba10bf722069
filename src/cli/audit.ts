import type { Command } from 'commander';
import type { AuditEntry, AuditFilter } from '../store/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, table } from './io.js';
import { type TargetFlags, targetOptions, withTarget } from './target.js';

type AuditFlags = TargetFlags & {
  project?: string;
  principal?: string;
  action?: string;
  outcome?: string;
  since?: string;
  until?: string;
  limit: string;
};

const OUTCOMES = ['ok', 'denied', 'failed'] as const;

function filterOf(flags: AuditFlags): AuditFilter {
  if (flags.outcome !== undefined && !(OUTCOMES as readonly string[]).includes(flags.outcome)) {
    throw new CliExit(EXIT.USAGE, `--outcome ${flags.outcome}: expected ${OUTCOMES.join(', ')}`);
  }
  const filter: Record<string, string> = {};
  for (const name of ['project', 'principal', 'action', 'outcome', 'since', 'until'] as const) {
    const value = flags[name];
    if (value !== undefined) filter[name] = value;
  }
  return filter as AuditFilter;
}

function row(e: AuditEntry): string[] {
  return [
    e.at,
    e.outcome,
    e.code ?? '',
    e.principalKind,
    e.principal,
    e.project ?? '',
    e.action,
    e.resource,
    e.requestId,
  ];
}

/** `touchstone audit list`: the newest audit entries, from a server or the local data dir. */
export function auditCommand(program: Command, io: CliIO): void {
  const audit = program.command('audit').description('Read the audit trail (writes and refusals).');
  targetOptions(
    audit
      .command('list')
      .description('List audit entries, newest first.')
      .option('-p, --project <name>', 'only this project')
      .option('--principal <id>', 'only this principal (a key id or <issuer>#<subject>)')
      .option('--action <action>', 'only this action, e.g. "POST /v1alpha1/policies"')
      .option('--outcome <outcome>', `only this outcome (${OUTCOMES.join(', ')})`)
      .option('--since <time>', 'RFC 3339: at or after')
      .option('--until <time>', 'RFC 3339: before')
      .option('-n, --limit <n>', 'most entries shown (1–1000)', '100'),
  ).action(async (flags: AuditFlags) => {
    const limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new CliExit(EXIT.USAGE, `--limit ${flags.limit}: expected 1–1000`);
    }
    const filter = filterOf(flags);
    const entries = await withTarget(
      flags,
      io,
      async (client) => {
        const q = new URLSearchParams({
          ...(filter as Record<string, string>),
          page_size: `${limit}`,
        });
        const body = await client.call<{ entries: AuditEntry[] }>('GET', `v1alpha1/audit?${q}`);
        return body.entries;
      },
      async (store, kit) => {
        const trail = new kit.AuditTrail({
          store: store.audit,
          clock: kit.systemClock,
          retentionMs: 0,
          logger: kit.silentLogger(),
        });
        return (await trail.list(kit.OPEN_PRINCIPAL, filter, { pageSize: limit })).items;
      },
    );
    io.stdout.write(
      flags.json
        ? `${JSON.stringify(entries, null, 2)}\n`
        : `${table(
            [
              'AT',
              'OUTCOME',
              'CODE',
              'KIND',
              'PRINCIPAL',
              'PROJECT',
              'ACTION',
              'RESOURCE',
              'REQUEST',
            ],
            entries.map(row),
          )}\n`,
    );
  });
}
