import type { Command } from 'commander';
import type { EvaluatorTypeView } from '../evaluators/index.js';
import type { CliIO } from './io.js';
import { configFromFlags } from './serve.js';
import { namedServer, outputOption, type TargetFlags } from './target.js';

interface ParamSchema {
  properties?: Record<string, { enum?: unknown[] }>;
  required?: string[];
}

/** `pattern (required), flags, mode=strict|unordered` — a type's params, short. */
function paramsText(params: Record<string, unknown>): string {
  const schema = params as ParamSchema;
  const required = new Set(schema.required ?? []);
  const names = Object.entries(schema.properties ?? {}).map(([name, p]) => {
    const values = Array.isArray(p.enum) ? `=${p.enum.join('|')}` : '';
    return `${name}${values}${required.has(name) ? ' (required)' : ''}`;
  });
  return names.length === 0 ? 'none' : names.join(', ');
}

/** One type as a few lines: name, cost and needs; what it does; its params. */
function typeText(t: EvaluatorTypeView): string {
  return [
    `${t.type} (${t.cheap ? 'cheap' : 'calls a judge model'}; needs ${t.needs.join(', ') || 'nothing'})`,
    `  ${t.description}`,
    `  params: ${paramsText(t.params)}`,
  ].join('\n');
}

/** The evaluator types of this build, as a server would list them for the same config. */
async function localTypes(flags: TargetFlags, io: CliIO): Promise<EvaluatorTypeView[]> {
  const config = configFromFlags(flags, io);
  const kit = await import('./local.js');
  const local = await kit.createLocalEvaluation(config, {
    env: io.env,
    logger: kit.silentLogger(),
  });
  try {
    return local.service.describeTypes();
  } finally {
    await local.close();
  }
}

export function evaluatorsCommand(program: Command, io: CliIO): void {
  const evaluators = program
    .command('evaluators')
    .description('The evaluator types policies, runs and `evaluate` can use (docs/evaluators.md).');

  evaluators
    .command('list')
    .description(
      'List evaluator types with what they need and their params (--json: params as JSON Schema).',
    )
    .option(
      '--server <url>',
      "list a server's types, URL or HOST:PORT (default: $TOUCHSTONE_SERVER, else this build's)",
    )
    .option('-c, --config <file>', 'YAML config file (local mode)')
    .option('--json', 'print JSON')
    .addOption(outputOption())
    .action(async (flags: TargetFlags) => {
      const client = namedServer(flags, io);
      const types =
        client === undefined
          ? await localTypes(flags, io)
          : (await client.call<{ evaluators: EvaluatorTypeView[] }>('GET', 'v1alpha1/evaluators'))
              .evaluators;
      io.stdout.write(
        flags.json
          ? `${JSON.stringify(types, null, 2)}\n`
          : `${types.map(typeText).join('\n\n')}\n`,
      );
    });
}
