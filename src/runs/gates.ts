import { z } from 'zod';
import type { ErrorDetail } from '../core/index.js';
import { mightProduce } from '../evaluators/index.js';
import type { MetricInfo, MetricSummary } from './summaries.js';

/**
 * Gates: conditions a finished run must meet, written `<metric> >= <value>`,
 * `<metric> <= <value>`, `<metric>.pass^<k> >= <fraction>` (or `pass@<k>`), or structured as
 * `{metric, min}` / `{metric, max}` with the same metric text. Any failed gate makes the run
 * FAILED (CLI exit code 3).
 */

const GATE_TEXT = /^\s*(\S+)\s*(>=|<=)\s*(\S+)\s*$/;
const PASS_K = /^(.+)\.pass([\^@])([1-9]\d*)$/;

/** A gate as written in a spec. */
export const GateSchema = z.union([
  z.string().min(1).max(512),
  z.strictObject({ metric: z.string().min(1).max(512), min: z.number().finite() }),
  z.strictObject({ metric: z.string().min(1).max(512), max: z.number().finite() }),
]);
export type GateInput = z.infer<typeof GateSchema>;

export interface Gate {
  /** The gate's metric text as written: `exact-match`, `exact-match.pass^3`. */
  text: string;
  /** The summarised metric it reads. */
  metric: string;
  /** `mean` of the metric, or the share of tasks passing k trials (`pass^k`) or any of k (`pass@k`). */
  stat: 'mean' | 'pass^k' | 'pass@k';
  k?: number;
  op: '>=' | '<=';
  threshold: number;
}

/** How a gate reads in the API: `{metric, min}` or `{metric, max}`. */
export function gateView(gate: Gate): { metric: string; min?: number; max?: number } {
  return gate.op === '>='
    ? { metric: gate.text, min: gate.threshold }
    : { metric: gate.text, max: gate.threshold };
}

/** Parses one gate; a string names what is wrong with it. */
export function parseGate(input: GateInput): Gate | string {
  let text: string;
  let op: '>=' | '<=';
  let threshold: number;
  if (typeof input === 'string') {
    const m = GATE_TEXT.exec(input);
    if (m === null) {
      return 'expected `<metric> >= <value>`, `<metric> <= <value>` or `<metric>.pass^<k> >= <fraction>`';
    }
    text = m[1] as string;
    op = m[2] as '>=' | '<=';
    threshold = Number(m[3]);
    if (!Number.isFinite(threshold) || (m[3] as string).trim() === '') {
      return `"${(m[3] as string).slice(0, 32)}" is not a number`;
    }
  } else {
    text = input.metric.trim();
    op = 'min' in input ? '>=' : '<=';
    threshold = 'min' in input ? input.min : input.max;
  }
  const k = PASS_K.exec(text);
  if (k === null) return { text, metric: text, stat: 'mean', op, threshold };
  if (threshold < 0 || threshold > 1) return `a pass^k or pass@k gate compares a fraction (0 to 1)`;
  return {
    text,
    metric: k[1] as string,
    stat: k[2] === '^' ? 'pass^k' : 'pass@k',
    k: Number(k[3]),
    op,
    threshold,
  };
}

/**
 * Checks parsed gates against the metrics the run's evaluators produce and its trial count.
 * `undefined` gates (refused by the shape) are skipped; so are the checks a value could not
 * settle: k against trials when trials is invalid, and a metric one of the `unresolved`
 * evaluators (those that did not bind) might produce.
 */
export function checkGates(
  gates: readonly (Gate | string | undefined)[],
  metrics: readonly MetricInfo[],
  trials: number | undefined,
  path: string,
  unresolved: readonly string[] | undefined,
): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const byName = new Map(metrics.map((m) => [m.metric, m]));
  gates.forEach((gate, i) => {
    const at = `${path}[${i}]`;
    if (gate === undefined) return;
    if (typeof gate === 'string') {
      details.push({ path: at, message: gate });
      return;
    }
    const info = byName.get(gate.metric);
    if (info === undefined) {
      if (mightProduce(unresolved, gate.metric)) return;
      const known = metrics.map((m) => m.metric).join(', ');
      details.push({
        path: at,
        message: `no evaluator of the run produces metric "${gate.metric}"; known metrics: ${known}`,
      });
      return;
    }
    if (info.kind === 'label') {
      details.push({ path: at, message: `metric "${gate.metric}" is a label, not a number` });
      return;
    }
    if (gate.stat !== 'mean') {
      if (info.kind !== 'passed') {
        details.push({
          path: at,
          message: `${gate.stat} needs a pass/fail metric; "${gate.metric}" is a number`,
        });
      } else if (trials !== undefined && (gate.k ?? 1) > trials) {
        details.push({
          path: at,
          message: `k = ${gate.k} is more than the run's trials (${trials})`,
        });
      }
    }
  });
  return details;
}

export interface GateResult {
  gate: { metric: string; min?: number; max?: number };
  passed: boolean;
  /** The value compared; null when the metric has no scored results. */
  value: number | null;
  /** Why a gate without a value failed. */
  reason?: string;
}

/** Evaluates gates over the run's summaries. A gate whose metric has no scored results fails. */
export function evaluateGates(
  gates: readonly Gate[],
  summaries: readonly MetricSummary[],
): GateResult[] {
  const byName = new Map(summaries.map((s) => [s.metric, s]));
  return gates.map((gate) => {
    const summary = byName.get(gate.metric);
    let value: number | null = null;
    let reason: string | undefined;
    if (summary === undefined || summary.n === 0) {
      reason = `metric "${gate.metric}" has no scored results (skipped and errored results do not count)`;
    } else if (gate.stat === 'mean') {
      value = summary.mean;
    } else {
      const table = gate.stat === 'pass^k' ? summary.passHatK : summary.passAtK;
      // One trial per task: pass@1 and pass^1 are the mean (summaries list them only with trials).
      const entry = table === undefined && gate.k === 1 ? summary.mean : table?.[String(gate.k)];
      if (entry === undefined || entry === null) {
        reason = `no task of metric "${gate.metric}" has ${gate.k} scored trials`;
      } else {
        value = entry;
      }
    }
    const passed =
      value !== null && (gate.op === '>=' ? value >= gate.threshold : value <= gate.threshold);
    return {
      gate: gateView(gate),
      passed,
      value,
      ...(reason === undefined ? {} : { reason }),
    };
  });
}
