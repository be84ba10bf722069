import type { Command } from 'commander';
import type { SourceStatus, SourceView } from '../sources/index.js';
import type { CliIO } from './io.js';
import {
  callNamed,
  localScope,
  printResult,
  type ResourceFlags,
  resourceCommand,
  resourcePath,
} from './resources.js';
import { targetOptions } from './target.js';

type Flags = ResourceFlags;

const withSources = localScope((kit) => kit.localSources);

interface SourceShape {
  metadata: { name: string; generation?: number; labels?: Record<string, string> };
  spec: { connector?: string; variant?: string };
  status?: SourceStatus;
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
  resourceCommand<SourceView, SourceView>(program, io, stdin, {
    noun: 'source',
    plural: 'sources',
    description:
      'Manage trace sources: pull traces from MLflow, Phoenix or Langfuse and score them.',
    scope: withSources,
    apply: {
      description:
        'Create or replace sources from a YAML or JSON file (several documents allowed; - for stdin).',
      file: 'TraceSource resources',
      project: 'project, unless a resource names one',
      dryRun: 'check everything (rules, endpoint, credential grant, policies) without storing',
      line: (view, verb) => {
        const s = shape(view);
        return `${verb}: source ${s.metadata.name} (project ${projectOf(s)})`;
      },
    },
    list: {
      description: 'List sources with their phase, lag and counts.',
      headers: ['SOURCE', 'CONNECTOR', 'PHASE', 'LAG', 'PULLED', 'SCORED', 'LAST ERROR'],
      row: (view) => {
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
    },
    get: { description: 'Show one source with its status, as JSON.' },
    delete: {
      description: 'Delete a source; the traces it pulled and their scores stay.',
      line: (_view, name) => `deleted source ${name}`,
    },
    stateVerbs: (source) => pauseVerbs(source, io),
    verbs: (source) => backfillVerb(source, io),
  });
}

/** `source pause` and `source resume`. */
function pauseVerbs(source: Command, io: CliIO): void {
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
}

/** `source backfill`: read history again from a time. */
function backfillVerb(source: Command, io: CliIO): void {
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
      (s, caller) => s.backfill(caller, flags.project, name, flags.since),
    );
    printResult(
      io,
      flags,
      view,
      `backfilling source ${name} from ${flags.since}: ${statusLine(shape(view))}`,
    );
  });
}
