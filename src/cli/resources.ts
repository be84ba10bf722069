import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, describeError, readResources } from './io.js';
import type { TargetFlags } from './target.js';

/**
 * What the resource commands (policy, source, webhook) share: the REST path of one resource,
 * printing (text or `--json`), and applying every document of a file.
 */

export interface ResourceFlags extends TargetFlags {
  project?: string;
}

/** `v1alpha1/<plural>/<name><suffix>?project=…` */
export function resourcePath(
  plural: string,
  name: string,
  flags: ResourceFlags,
  suffix = '',
  query: Record<string, string> = {},
): string {
  const q = new URLSearchParams(query);
  if (flags.project !== undefined) q.set('project', flags.project);
  const qs = q.toString();
  return `v1alpha1/${plural}/${encodeURIComponent(name)}${suffix}${qs === '' ? '' : `?${qs}`}`;
}

/** The apply query: `project` and, for a dry run, `validate_only`. */
export function applyQuery(flags: ResourceFlags & { dryRun?: boolean }): URLSearchParams {
  return new URLSearchParams({
    ...(flags.project === undefined ? {} : { project: flags.project }),
    ...(flags.dryRun ? { validate_only: 'true' } : {}),
  });
}

export function printResult(
  io: CliIO,
  flags: { json?: boolean },
  value: unknown,
  text: string,
): void {
  io.stdout.write(flags.json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}

/**
 * Applies each document of a file on its own: a bad one is reported with its document number and
 * does not stop the others; the command then exits with a usage error. One document: its error
 * is the command's.
 */
export async function applyDocuments<T>(
  io: CliIO,
  flags: ResourceFlags & { file: string },
  stdin: () => string,
  apply: (doc: unknown) => Promise<T>,
  line: (applied: T) => string,
): Promise<void> {
  const docs = readResources(flags.file, stdin);
  const applied: T[] = [];
  const failures: string[] = [];
  for (const [i, doc] of docs.entries()) {
    try {
      applied.push(await apply(doc));
    } catch (err) {
      if (docs.length === 1) throw err;
      failures.push(`document ${i + 1}: ${describeError(err).text}`);
    }
  }
  printResult(io, flags, applied, applied.map(line).join('\n'));
  if (failures.length > 0) throw new CliExit(EXIT.USAGE, failures.join('\n'));
}
