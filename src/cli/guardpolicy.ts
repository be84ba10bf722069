import type { Command } from 'commander';
import type { GuardPolicyView } from '../guardrails/index.js';
import type { CliIO } from './io.js';
import { localScope, resourceCommand } from './resources.js';

const withGuardPolicies = localScope((kit) => kit.localGuardPolicies);

interface GuardPolicyShape {
  metadata: { name: string; generation?: number; labels?: Record<string, string> };
  spec: { checks?: { type: string; action: string }[]; failOpen?: boolean; deadline?: string };
}

const shape = (p: GuardPolicyView) => p as unknown as GuardPolicyShape;
const projectOf = (p: GuardPolicyShape) => p.metadata.labels?.['touchstone.dev/project'] ?? '';

/** `touchstone guardpolicy`: the GuardPolicy resources gateways' guardrails decide by. */
export function guardPolicyCommand(program: Command, io: CliIO, stdin: () => string): void {
  resourceCommand<GuardPolicyView, GuardPolicyView>(program, io, stdin, {
    noun: 'guardpolicy',
    plural: 'guardpolicies',
    description:
      'Manage guard policies: the checks the prompt-guard webhook and the external processor run on gateway traffic.',
    scope: withGuardPolicies,
    apply: {
      description:
        'Create or replace guard policies from a YAML or JSON file (several documents allowed; - for stdin).',
      file: 'GuardPolicy resources',
      project: 'project, unless a resource names one',
      dryRun: 'check every guard policy (patterns, CEL, judges, timeouts) without storing',
      line: (p, verb) => {
        const s = shape(p);
        return `${verb}: guardpolicy ${s.metadata.name} (project ${projectOf(s)}, generation ${s.metadata.generation ?? 0})`;
      },
    },
    list: {
      description: "List a project's guard policies.",
      headers: ['NAME', 'PROJECT', 'CHECKS', 'DEADLINE', 'ON ERROR', 'GEN'],
      row: (view) => {
        const p = shape(view);
        return [
          p.metadata.name,
          projectOf(p),
          (p.spec.checks ?? []).map((c) => `${c.type}:${c.action}`).join(','),
          p.spec.deadline ?? '',
          p.spec.failOpen === true ? 'allow' : 'block',
          String(p.metadata.generation ?? 0),
        ];
      },
    },
    get: { description: 'Show one guard policy as JSON.' },
    delete: {
      description: 'Delete a guard policy; gateways calling it are then refused (503).',
      line: (deleted, name) => `deleted guardpolicy ${name} (project ${projectOf(shape(deleted))})`,
    },
  });
}
