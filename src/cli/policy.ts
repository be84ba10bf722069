import type { Command } from 'commander';
import type { PolicyView } from '../policies/index.js';
import type { CliIO } from './io.js';
import {
  localScope,
  printResult,
  type ResourceFlags,
  resourceCommand,
  resourcePath,
} from './resources.js';
import { targetOptions } from './target.js';

type Flags = ResourceFlags;

const withPolicies = localScope((kit) => kit.localPolicies);

interface PolicyShape {
  metadata: { name: string; generation?: number; labels?: Record<string, string> };
  spec: {
    selector?: string;
    sampling?: { rate?: number };
    stages?: unknown[];
    alerts?: unknown[];
    disabled?: boolean;
  };
}

const shape = (p: PolicyView) => p as unknown as PolicyShape;
const projectOf = (p: PolicyShape) => p.metadata.labels?.['touchstone.dev/project'] ?? '';

export function policyCommand(program: Command, io: CliIO, stdin: () => string): void {
  resourceCommand<PolicyView, PolicyView>(program, io, stdin, {
    noun: 'policy',
    plural: 'policies',
    description: 'Manage online evaluation policies: which traces are scored, how, and alerts.',
    scope: withPolicies,
    apply: {
      description:
        'Create or replace policies from a YAML or JSON file (several documents allowed; - for stdin).',
      file: 'OnlineEvalPolicy resources',
      project: 'project, unless a resource names one',
      dryRun: 'check every policy (CEL, evaluators, params, judge) without storing',
      line: (p, verb) => {
        const s = shape(p);
        return `${verb}: policy ${s.metadata.name} (project ${projectOf(s)}, generation ${s.metadata.generation ?? 0})`;
      },
    },
    list: {
      description: "List a project's policies.",
      headers: ['NAME', 'PROJECT', 'SELECTOR', 'RATE', 'STAGES', 'ALERTS', 'STATE', 'GEN'],
      row: (view) => {
        const p = shape(view);
        return [
          p.metadata.name,
          projectOf(p),
          p.spec.selector ?? '(all traces)',
          String(p.spec.sampling?.rate ?? 1),
          String(p.spec.stages?.length ?? 0),
          String(p.spec.alerts?.length ?? 0),
          p.spec.disabled ? 'disabled' : 'enabled',
          String(p.metadata.generation ?? ''),
        ];
      },
    },
    get: { description: 'Show one policy as JSON (it can be applied again unchanged).' },
    delete: {
      description: 'Delete a policy; the results it stored stay readable.',
      line: (deleted, name) => `deleted policy ${name} (project ${projectOf(shape(deleted))})`,
    },
    verbs: (policy) => rescoreVerb(policy, io),
  });
}

/** `policy rescore`: queue traces started since a time to be scored again. */
function rescoreVerb(policy: Command, io: CliIO): void {
  targetOptions(
    policy
      .command('rescore')
      .description('Queue traces started since a time to be scored again by this policy.')
      .argument('<name>')
      .requiredOption('--since <time>', 'RFC 3339 time, e.g. 2026-01-02T00:00:00Z')
      .option('-p, --project <name>', 'project'),
  ).action(async (name: string, flags: Flags & { since: string }) => {
    let local = false;
    const out = await withPolicies(
      flags,
      io,
      (c) =>
        c.call<{ queued: number; since: string }>(
          'POST',
          resourcePath('policies', name, flags, ':rescore'),
          {
            since: flags.since,
          },
        ),
      (s, caller) => {
        local = true;
        return s.rescore(caller, flags.project, name, flags.since);
      },
    );
    printResult(
      io,
      flags,
      out,
      `queued ${out.queued} trace(s) started since ${out.since} for policy ${name}` +
        (local ? '\n(a running server scores them; this command only queues)' : ''),
    );
  });
}
