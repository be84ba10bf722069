import type { Command } from 'commander';
import { type Result, scoreNumber } from '../core/index.js';
import type { ScoresEntry } from '../policies/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, table } from './io.js';
import { type TargetFlags, targetOptions, withTarget } from './target.js';
import { labelMap } from './traces.js';

interface ListFlags extends TargetFlags {
  project?: string;
  service?: string;
  policy?: string;
  evaluator?: string;
  since?: string;
  label?: string[];
  limit: string;
  all?: boolean;
  jsonl?: boolean;
}

/** `exact-match=pass latency=0.82 tone=friendly` — one result's scores, short. */
function scoreText(r: Result): string {
  if (r.outcome === 'OUTCOME_SKIPPED') return `${r.evaluator}: skipped`;
  if (r.outcome === 'OUTCOME_ERROR') return `${r.evaluator}: error`;
  return r.scores
    .map((s) => {
      if (s.passed !== undefined) return `${s.name}=${s.passed ? 'pass' : 'fail'}`;
      if (s.label !== undefined) return `${s.name}=${s.label}`;
      const n = scoreNumber(s);
      return `${s.name}=${n === undefined ? '' : Number(n.toFixed(4))}`;
    })
    .join(' ');
}

export function scoresCommand(program: Command, io: CliIO): void {
  const scores = program.command('scores').description('Read online evaluation scores in bulk.');

  targetOptions(
    scores
      .command('list')
      .description('List scored traces, most recently scored first, with their results by policy.')
      .option('-p, --project <name>', 'project')
      .option('--service <name>', 'only this service')
      .option('--policy <name>', 'only traces this policy scored')
      .option('--evaluator <name>', 'only traces with a result of this evaluator instance')
      .option('--since <time>', 'RFC 3339: only traces scored at or after this time')
      .option('-l, --label <key=value...>', 'only traces with these labels')
      .option('-n, --limit <n>', 'most entries to show', '50')
      .option('--all', 'follow every page (export); progress goes to stderr')
      .option('--jsonl', 'print one JSON entry per line (for export)'),
  ).action(async (flags: ListFlags) => {
    const limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new CliExit(EXIT.USAGE, '--limit must be 1 to 1000');
    }
    if (flags.since !== undefined && Number.isNaN(Date.parse(flags.since))) {
      throw new CliExit(EXIT.USAGE, `--since ${flags.since}: expected an RFC 3339 time`);
    }
    const labels = labelMap(flags.label);
    const filter = {
      ...(flags.project === undefined ? {} : { project: flags.project }),
      ...(flags.service === undefined ? {} : { service: flags.service }),
      ...(flags.policy === undefined ? {} : { policy: flags.policy }),
      ...(flags.evaluator === undefined ? {} : { evaluator: flags.evaluator }),
    };
    const pageSize = flags.all ? 1000 : limit;
    const fetchPage = (token: string | undefined) =>
      withTarget(
        flags,
        io,
        async (c) => {
          const q = new URLSearchParams({ page_size: String(pageSize), ...filter });
          if (flags.since !== undefined) q.set('since', flags.since);
          for (const [k, v] of Object.entries(labels)) q.append('labels', `${k}=${v}`);
          if (token !== undefined) q.set('page_token', token);
          const body = await c.call<{ entries: ScoresEntry[]; next_page_token?: string }>(
            'GET',
            `v1alpha1/scores?${q}`,
          );
          return { items: body.entries, nextPageToken: body.next_page_token };
        },
        (store, kit) =>
          new kit.ScoreQueries(store).list(
            kit.OPEN_PRINCIPAL,
            {
              ...filter,
              labels,
              ...(flags.since === undefined ? {} : { since: Date.parse(flags.since) }),
            },
            { pageSize, ...(token === undefined ? {} : { pageToken: token }) },
          ),
      );

    const collected: ScoresEntry[] = [];
    let token: string | undefined;
    let count = 0;
    do {
      const page = await fetchPage(token);
      token = flags.all ? page.nextPageToken : undefined;
      count += page.items.length;
      if (flags.jsonl) {
        for (const e of page.items) io.stdout.write(`${JSON.stringify(e)}\n`);
      } else collected.push(...page.items);
      if (flags.all)
        io.stderr.write(`scores: ${count} entries${token === undefined ? '\n' : '\r'}`);
    } while (token !== undefined);
    if (flags.jsonl) return;
    if (flags.json) {
      io.stdout.write(`${JSON.stringify(collected, null, 2)}\n`);
      return;
    }
    const rows = collected.flatMap((e) =>
      Object.entries(e.results).map(([policy, results]) => [
        e.trace.traceId,
        e.trace.service,
        e.trace.name,
        policy,
        results.map(scoreText).join(', '),
        e.scoredAt,
      ]),
    );
    io.stdout.write(`${table(['TRACE', 'SERVICE', 'NAME', 'POLICY', 'SCORES', 'SCORED'], rows)}\n`);
  });
}
