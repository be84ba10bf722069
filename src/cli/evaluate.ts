import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { type Result, scoreNumber } from '../core/index.js';
import type { EvaluatorRef, RecordResults } from '../evaluators/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, table } from './io.js';
import { configFromFlags } from './serve.js';
import { namedServer, outputOption } from './target.js';

/**
 * `-e latency:thresholdMs=2000,unit=ms` → {ref: 'latency', params: {thresholdMs: 2000, unit: 'ms'}}.
 * Values are JSON when they parse as JSON, else text. A comma starts a new param only when
 * `name=` follows, so regex values may hold commas.
 */
export function parseEvaluatorSpec(spec: string): EvaluatorRef {
  const colon = spec.indexOf(':');
  const ref = colon < 0 ? spec : spec.slice(0, colon);
  if (ref === '') throw new CliExit(EXIT.USAGE, `-e ${spec}: missing evaluator name`);
  if (colon < 0) return { ref };
  const params: Record<string, unknown> = {};
  for (const part of spec.slice(colon + 1).split(/,(?=[A-Za-z_][A-Za-z0-9_]*=)/)) {
    const eq = part.indexOf('=');
    if (eq <= 0)
      throw new CliExit(EXIT.USAGE, `-e ${spec}: expected name:param=value[,param=value]`);
    const raw = part.slice(eq + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // Plain text value.
    }
    params[part.slice(0, eq)] = value;
  }
  return { ref, params };
}

export function readJsonl(file: string, stdin: () => string): unknown[] {
  let text: string;
  try {
    text = file === '-' ? stdin() : readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliExit(
      EXIT.USAGE,
      `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const records: unknown[] = [];
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    try {
      records.push(JSON.parse(line));
    } catch {
      throw new CliExit(
        EXIT.USAGE,
        `${file} line ${i + 1}: not valid JSON (each line must be one JSON record)`,
      );
    }
  }
  if (records.length === 0) throw new CliExit(EXIT.USAGE, `${file} holds no records`);
  return records;
}

function scoreText(r: Result): string {
  if (r.outcome !== 'OUTCOME_SCORED') return r.reason ?? '';
  return r.scores
    .map((s) => {
      const v =
        s.passed !== undefined
          ? s.passed
            ? 'pass'
            : 'fail'
          : (s.label ?? String(Math.round((s.value as number) * 1e4) / 1e4));
      return `${s.name}=${v}`;
    })
    .join(' ');
}

/** Mean of each metric over scored results, with outcome counts. */
export function summarize(results: RecordResults[]): string[][] {
  const byMetric = new Map<string, { sum: number; n: number }>();
  const outcomes = new Map<string, { scored: number; skipped: number; error: number }>();
  for (const rec of results) {
    for (const r of rec.results) {
      const o = outcomes.get(r.evaluator) ?? { scored: 0, skipped: 0, error: 0 };
      if (r.outcome === 'OUTCOME_SCORED') o.scored++;
      else if (r.outcome === 'OUTCOME_SKIPPED') o.skipped++;
      else o.error++;
      outcomes.set(r.evaluator, o);
      for (const s of r.scores) {
        const v = scoreNumber(s);
        if (v === undefined) continue;
        const m = byMetric.get(s.name) ?? { sum: 0, n: 0 };
        m.sum += v;
        m.n++;
        byMetric.set(s.name, m);
      }
    }
  }
  return [...byMetric.entries()].map(([name, m]) => {
    const evaluator =
      [...outcomes.keys()].find((e) => name === e || name.startsWith(`${e}.`)) ?? '';
    const o = outcomes.get(evaluator);
    return [
      name,
      (m.sum / m.n).toFixed(4),
      String(m.n),
      String(o?.skipped ?? 0),
      String(o?.error ?? 0),
    ];
  });
}

export function evaluateCommand(program: Command, io: CliIO, stdin: () => string): void {
  program
    .command('evaluate')
    .description('Score records from a JSONL file with evaluators, locally or on a server.')
    .requiredOption('-f, --file <file>', 'JSONL file of records (- for stdin)')
    .requiredOption(
      '-e, --evaluator <spec...>',
      'evaluator, with params as name:param=value[,param=value]',
    )
    .option('--judge <name>', 'judge from the config to use for judge evaluators')
    .option('--project <name>', 'project (server mode)')
    .option(
      '--server <url>',
      'evaluate on this server, URL or HOST:PORT (default: $TOUCHSTONE_SERVER, else locally)',
    )
    .option('-c, --config <file>', 'YAML config file (local mode: judges)')
    .option('--json', 'print the results as JSON')
    .addOption(outputOption())
    .action(
      async (flags: {
        file: string;
        evaluator: string[];
        judge?: string;
        project?: string;
        server?: string;
        config?: string;
        json?: boolean;
      }) => {
        const records = readJsonl(flags.file, stdin);
        const request = {
          records,
          evaluators: flags.evaluator.map(parseEvaluatorSpec),
          ...(flags.judge === undefined ? {} : { judge: flags.judge }),
          ...(flags.project === undefined ? {} : { project: flags.project }),
        };
        const client = namedServer(flags, io);
        let results: RecordResults[];
        if (client !== undefined) {
          results = (
            await client.call<{ results: RecordResults[] }>('POST', 'v1alpha1/evaluate', request)
          ).results;
        } else {
          const config = configFromFlags(
            flags.config === undefined ? {} : { config: flags.config },
            io,
          );
          const kit = await import('./local.js');
          const local = await kit.createLocalEvaluation(config, {
            env: io.env,
            logger: kit.silentLogger(),
          });
          try {
            results = await local.service.evaluate(request);
          } finally {
            await local.close();
          }
        }
        if (flags.json) {
          io.stdout.write(`${JSON.stringify({ results }, null, 2)}\n`);
          return;
        }
        const rows = results.flatMap((rec) =>
          rec.results.map((r) => [
            rec.recordId,
            r.evaluator,
            r.outcome.replace('OUTCOME_', ''),
            scoreText(r),
          ]),
        );
        io.stdout.write(
          `${table(['RECORD', 'EVALUATOR', 'OUTCOME', 'SCORES / REASON'], rows)}\n\n`,
        );
        io.stdout.write(
          `${table(['METRIC', 'MEAN', 'N', 'SKIPPED', 'ERRORS'], summarize(results))}\n`,
        );
      },
    );
}
