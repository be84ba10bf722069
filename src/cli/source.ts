import type { Command } from 'commander';
import { pino } from 'pino';
import { createSourceService } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { systemClock } from '../core/index.js';
import type { SourceService, SourceStatus, SourceView } from '../sources/index.js';
import type { ApiClient } from './client.js';
import type { CliIO } from './io.js';
import {
  applyDocuments,
  applyQuery,
  callNamed,
  listResources,
  printResult,
  type ResourceFlags,
  resourcePath,
} from './resources.js';
import { configFromFlags } from './serve.js';
import { targetOptions, withTarget } from './target.js';

type Flags = ResourceFlags;

function withSources<T>(
  flags: Flags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (service: SourceService) => Promise<T>,
): Promise<T> {
  return withTarget(flags, io, remote, async (store) =>
    local(
      createSourceService(configFromFlags(flags, io), {
        store,
        clock: systemClock,
        env: io.env,
        logger: pino({ level: 'silent' }),
      }),
    ),
  );
}

interface SourceShape {
  metadata: { name: string; generation?: number; labels?: Record<string, string> };
  spec: { connector?: string; variant?: string };
  status?: SourceStatus;
  created?: boolean;
}

const shape = (v: SourceView) => v as unknown as SourceShape;
const projectOf = (s: SourceShape) => s.metadata.labels?.['touchstone.dev/project'] ?? '';

function statusLine(s: SourceShape): string {
  const st = s.status;
  return st === undefined
    ? ''
    : `phase ${st.phase}, watermark ${st.watermark}, pulled ${st.pulled}, scored ${st.scored}` +
        (st.lastError === undefined ? '' : `, last error: ${st.lastError}`);
}

export function sourceCommand(program: Command, io: CliIO, stdin: () => string): void {
  const source = program
    .command('source')
    .description(
      'Manage trace sources: pull traces from MLflow, Phoenix or Langfuse and score them.',
    );

  targetOptions(
    source
      .command('apply')
      .description(
        'Create or replace sources from a YAML or JSON file (several documents allowed; - for stdin).',
      )
      .requiredOption('-f, --file <file>', 'TraceSource resources')
      .option('-p, --project <name>', 'project, unless a resource names one')
      .option(
        '--dry-run',
        'check everything (rules, endpoint, credential grant, policies) without storing',
      ),
  ).action(async (flags: Flags & { file: string; dryRun?: boolean }) => {
    await applyDocuments(
      io,
      flags,
      stdin,
      (doc) =>
        withSources(
          flags,
          io,
          (c) => c.call<SourceView>('POST', `v1alpha1/sources?${applyQuery(flags)}`, doc),
          (s) =>
            s.apply(OPEN_PRINCIPAL, doc, {
              ...(flags.project === undefined ? {} : { project: flags.project }),
              validateOnly: flags.dryRun === true,
            }),
        ),
      (view) => {
        const s = shape(view);
        const verb = flags.dryRun ? 'valid' : s.created ? 'created' : 'applied';
        return `${verb}: source ${s.metadata.name} (project ${projectOf(s)})`;
      },
    );
  });

  targetOptions(
    source
      .command('list')
      .description('List sources with their phase, lag and counts.')
      .option('-p, --project <name>', 'project'),
  ).action(async (flags: Flags) => {
    await listResources<SourceView>(
      withSources,
      flags,
      io,
      'sources',
      ['SOURCE', 'CONNECTOR', 'PHASE', 'LAG', 'PULLED', 'SCORED', 'LAST ERROR'],
      (view) => {
        const s = shape(view);
        return [
          `${projectOf(s)}/${s.metadata.name}`,
          s.spec.variant === undefined
            ? (s.spec.connector ?? '')
            : `${s.spec.connector}/${s.spec.variant}`,
          s.status?.phase ?? '',
          s.status?.lagSeconds === null || s.status?.lagSeconds === undefined
            ? '-'
            : `${s.status.lagSeconds}s`,
          String(s.status?.pulled ?? 0),
          String(s.status?.scored ?? 0),
          s.status?.lastError ?? '',
        ];
      },
    );
  });

  targetOptions(
    source
      .command('get')
      .description('Show one source with its status, as JSON.')
      .argument('<name>')
      .option('-p, --project <name>', 'project'),
  ).action(async (name: string, flags: Flags) => {
    const got = await callNamed(withSources, flags, io, 'sources', name, 'get');
    io.stdout.write(`${JSON.stringify(got, null, 2)}\n`);
  });

  for (const verb of ['pause', 'resume'] as const) {
    targetOptions(
      source
        .command(verb)
        .description(
          verb === 'pause'
            ? 'Stop pulling (the watermark is kept).'
            : 'Pull again from the watermark.',
        )
        .argument('<name>')
        .option('-p, --project <name>', 'project'),
    ).action(async (name: string, flags: Flags) => {
      const view = await callNamed(withSources, flags, io, 'sources', name, verb);
      printResult(
        io,
        flags,
        view,
        `${verb === 'pause' ? 'paused' : 'resumed'} source ${name}: ${statusLine(shape(view))}`,
      );
    });
  }

  targetOptions(
    source
      .command('delete')
      .description('Delete a source; the traces it pulled and their scores stay.')
      .argument('<name>')
      .option('-p, --project <name>', 'project'),
  ).action(async (name: string, flags: Flags) => {
    const view = await callNamed(withSources, flags, io, 'sources', name, 'delete');
    printResult(io, flags, view, `deleted source ${name}`);
  });

  targetOptions(
    source
      .command('backfill')
      .description('Read history again from a time; only changed traces are scored again.')
      .argument('<name>')
      .requiredOption('--since <time>', 'RFC 3339 time, e.g. 2026-01-02T00:00:00Z')
      .option('-p, --project <name>', 'project'),
  ).action(async (name: string, flags: Flags & { since: string }) => {
    const view = await withSources(
      flags,
      io,
      (c) =>
        c.call<SourceView>('POST', resourcePath('sources', name, flags, ':backfill'), {
          since: flags.since,
        }),
      (s) => s.backfill(OPEN_PRINCIPAL, flags.project, name, flags.since),
    );
    printResult(
      io,
      flags,
      view,
      `backfilling source ${name} from ${flags.since}: ${statusLine(shape(view))}`,
    );
  });
}
