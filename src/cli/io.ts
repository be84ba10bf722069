import { isTouchstoneError } from '../core/index.js';
import { EXIT, type ExitCode } from './exit-codes.js';

export interface CliIO {
  env: Record<string, string | undefined>;
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream;
  /** Registers the handler for SIGTERM/SIGINT (main.ts wires it to the process). */
  onShutdownSignal(handler: (signal: string) => void | Promise<void>): void;
}

/** Thrown by commands to stop with an exit code and a message. */
export class CliExit extends Error {
  constructor(
    readonly code: ExitCode,
    message: string,
  ) {
    super(message);
  }
}

/** An error as the user should read it, with the exit code it deserves. */
export function describeError(err: unknown): { code: ExitCode; text: string } {
  if (err instanceof CliExit) return { code: err.code, text: err.message };
  if (isTouchstoneError(err)) {
    const usage = err.kind === 'invalid_argument' || err.kind === 'failed_precondition';
    const details = err.message.includes('\n')
      ? ''
      : err.details.map((d) => `\n  ${d.path}: ${d.message}`).join('');
    return { code: usage ? EXIT.USAGE : EXIT.ERROR, text: `${err.message}${details}` };
  }
  return { code: EXIT.ERROR, text: err instanceof Error ? err.message : String(err) };
}

/** Renders rows as an aligned text table. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}
