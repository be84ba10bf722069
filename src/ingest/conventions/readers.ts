import { genAi } from './gen-ai.js';
import { genAiLegacy } from './gen-ai-legacy.js';
import { langfuse } from './langfuse.js';
import { logfire } from './logfire.js';
import { mlflow } from './mlflow.js';
import { openInference } from './openinference.js';
import { openLlmetry } from './openllmetry.js';
import type { ConventionReader } from './reader.js';
import { vercelAi } from './vercel-ai.js';

/**
 * Every convention reader, in one static list, in the order DESIGN §4 names them. This order is
 * the default; where conventions reference §10 orders a field differently, `precedence.ts` says
 * so by reader name.
 */
export const READERS: readonly ConventionReader[] = [
  genAi,
  genAiLegacy,
  openInference,
  mlflow,
  langfuse,
  openLlmetry,
  vercelAi,
  logfire,
];

export type ReaderName =
  | 'gen-ai'
  | 'gen-ai-legacy'
  | 'openinference'
  | 'mlflow'
  | 'langfuse'
  | 'openllmetry'
  | 'vercel-ai'
  | 'logfire';

const BY_NAME = new Map(READERS.map((r) => [r.name, r]));

/** Readers in a precedence order given by name. */
export function inOrder(names: readonly ReaderName[]): readonly ConventionReader[] {
  return names.map((n) => BY_NAME.get(n)).filter((r): r is ConventionReader => r !== undefined);
}
