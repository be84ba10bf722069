/**
 * @module cli
 * The `touchstone` command. Commands call application functions (or the REST API with
 * `--server`) and hold no business logic; exit codes live in exit-codes.ts.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { auditCommand } from './audit.js';
import { datasetsCommand } from './datasets.js';
import { evaluateCommand } from './evaluate.js';
import { evaluatorsCommand } from './evaluators.js';
import { EXIT } from './exit-codes.js';
import { guardPolicyCommand } from './guardpolicy.js';
import { CliExit, type CliIO, describeError } from './io.js';
import { keysCommand } from './keys.js';
import { loginCommand } from './login.js';
import { mcpCommand } from './mcp.js';
import { operatorCommand } from './operator.js';
import { policyCommand } from './policy.js';
import { runCommand } from './run.js';
import { runsCommand } from './runs.js';
import { scoresCommand } from './scores.js';
import { serveCommand } from './serve.js';
import { sourceCommand } from './source.js';
import { applyOutputOption } from './target.js';
import { tracesCommand } from './traces.js';
import { webhookCommand } from './webhook.js';

export { EXIT } from './exit-codes.js';
export type { CliIO } from './io.js';

export const VERSION = '0.1.0';

/** Runs the CLI; resolves to the exit code (for `serve`, once the server has shut down). */
export async function runCli(
  argv: string[],
  io: CliIO,
  stdin = () => readFileSync(0, 'utf8'),
): Promise<number> {
  let finish: (code: number) => void = () => {};
  const served = new Promise<number>((resolve) => {
    finish = resolve;
  });
  let serving = false;

  const program = new Command('touchstone')
    .description('Touchstone: evaluation service for AI agents.')
    .version(VERSION)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    })
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText(
      'after',
      `
Where commands work:
  With --server URL (or HOST:PORT), on that server. Without one, on the local data dir
  (./.touchstone, or --data-dir); when the working directory has none, on the server running
  at 127.0.0.1:4318 if there is one. Which one is used is said on stderr.

Environment:
  TOUCHSTONE_SERVER    server for commands given no --server (e.g. http://127.0.0.1:4318)
  TOUCHSTONE_API_KEY   API key sent to the server as "Authorization: Bearer <key>"; without
                       one, the sign-in of touchstone login for that server is sent
  TOUCHSTONE_CONFIG_DIR  where touchstone login keeps sign-ins (default
                       $XDG_CONFIG_HOME/touchstone, else ~/.config/touchstone)
  TOUCHSTONE_*         server settings (e.g. TOUCHSTONE_DATA_DIR, TOUCHSTONE_STORE__DRIVER);
                       see docs/configuration.md

Exit codes: 0 success, 1 error, 2 usage or validation error, 3 a run's gate failed.
Docs: docs/cli.md`,
    );
  serveCommand(program, io, (code) => finish(code));
  operatorCommand(program, io, (code) => finish(code));
  program.hook('preAction', (_cmd, action) => {
    serving = action.name() === 'serve' || action.name() === 'operator';
  });
  program.hook('preAction', applyOutputOption);
  loginCommand(program, io);
  keysCommand(program, io);
  auditCommand(program, io);
  evaluateCommand(program, io, stdin);
  evaluatorsCommand(program, io);
  tracesCommand(program, io);
  webhookCommand(program, io, stdin);
  policyCommand(program, io, stdin);
  guardPolicyCommand(program, io, stdin);
  scoresCommand(program, io);
  sourceCommand(program, io, stdin);
  runCommand(program, io, stdin);
  runsCommand(program, io);
  datasetsCommand(program, io);
  mcpCommand(program, io);

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    // A command that already printed its outcome (a run's report) only sets the exit code.
    if (err instanceof CliExit && err.message === '') return err.code;
    const { code, text } = describeError(err);
    io.stderr.write(`touchstone: ${text}\n`);
    return code;
  }
  return serving ? served : EXIT.OK;
}
