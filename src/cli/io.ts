import { readFileSync } from 'node:fs';
import { describeYamlProblem, isTouchstoneError, parseYaml } from '../core/index.js';
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
    const text = err.message.includes('\n') ? err.message : withDetails(err.message, err.details);
    return { code: usage ? EXIT.USAGE : EXIT.ERROR, text };
  }
  return { code: EXIT.ERROR, text: err instanceof Error ? err.message : String(err) };
}

/**
 * An error's message with its details, each once on its own line. Messages that already list
 * the details on one line (`invalid policy: a: …; b: …`) are cut to their headline first.
 */
export function withDetails(
  message: string,
  details: readonly { path: string; message: string }[],
): string {
  if (details.length === 0) return message;
  const first = details[0] as { path: string; message: string };
  const at = message.indexOf(`${first.path}: ${first.message}`);
  const headline = at > 0 ? message.slice(0, at).replace(/[\s:;,]+$/, '') : message;
  return `${headline}${details.map((d) => `\n  ${d.path}: ${d.message}`).join('')}`;
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

/** A file's text, or stdin's for `-`; an unreadable file is a usage error. */
export function readText(file: string, stdin: () => string): string {
  try {
    return file === '-' ? stdin() : readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliExit(EXIT.USAGE, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code}`);
  }
}

/**
 * The values of YAML (or JSON) text's documents, empty ones skipped; a text that cannot be read
 * (syntax, duplicate keys, alias bombs) is a usage error naming `file` and the place.
 */
export function yamlDocuments(text: string, file: string): unknown[] {
  const result = parseYaml(text);
  if (!result.ok) {
    throw new CliExit(
      EXIT.USAGE,
      `${file} is not YAML or JSON: ${describeYamlProblem(result.problem)}`,
    );
  }
  return result.documents;
}

/** The documents of a YAML or JSON resource file (`-` for stdin); empty documents are skipped. */
export function readResources(file: string, stdin: () => string): unknown[] {
  const out = yamlDocuments(readText(file, stdin), file);
  if (out.length === 0) throw new CliExit(EXIT.USAGE, `${file} holds no resource`);
  return out;
}
