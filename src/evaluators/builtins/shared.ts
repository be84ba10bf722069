import { z } from 'zod';
import {
  contentText,
  type EvalRecord,
  isPresent,
  referenceCandidates,
  type Score,
  type Step,
} from '../../core/index.js';
import type { ScoreSpec } from '../contract.js';

/**
 * What several built-in evaluators need alike: params that also arrive as CLI text, text
 * normalization, reference candidates, the optional `within` bound score, and tool calls (actual
 * ones from the trajectory, expected ones from the reference).
 */

// ---------------------------------------------------------------------------------------------
// Params

const DECIMAL = /^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?$/i;

/**
 * A number param that also accepts its decimal spelling: the CLI passes `type:key=value` params
 * as text (`latency:thresholdMs=2000`). Anything else still fails, naming the field.
 */
export function numberParam<T extends z.ZodType<number>>(schema: T) {
  return z.preprocess(
    (v) => (typeof v === 'string' && DECIMAL.test(v.trim()) ? Number(v) : v),
    schema,
  );
}

/** A boolean param that also accepts `true`/`false` as text (see {@link numberParam}). */
export function booleanParam(defaultValue: boolean) {
  return z
    .preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean())
    .default(defaultValue);
}

/** A non-empty list param that also accepts comma-separated text. */
export function listParam<T extends z.ZodType>(item: T) {
  return z.preprocess(
    (v) =>
      typeof v === 'string'
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter((s) => s !== '')
        : v,
    z.array(item).min(1),
  );
}

/** An optional inclusive bound on a count (steps, tokens, words). */
export const countBound = () => numberParam(z.int().nonnegative()).optional();

// ---------------------------------------------------------------------------------------------
// Text

export interface TextOptions {
  caseSensitive?: boolean;
  ignorePunctuation?: boolean;
}

/** The params of evaluators that compare normalized text. */
export const textOptionParams = {
  caseSensitive: booleanParam(false),
  ignorePunctuation: booleanParam(false),
};

// Python's string.punctuation (the usual "ignore punctuation" in answer matching) spans Unicode
// punctuation plus math, currency and modifier symbols; other symbols such as emoji are content.
const PUNCTUATION = /[\p{P}\p{Sm}\p{Sc}\p{Sk}]/gu;
const WHITESPACE = /\s+/gu;

/** NFC, case-folded unless case-sensitive, punctuation dropped if asked, whitespace collapsed. */
export function normalizeText(text: string, options: TextOptions = {}): string {
  let s = text.normalize('NFC');
  if (options.caseSensitive !== true) s = s.toLowerCase();
  if (options.ignorePunctuation === true) s = s.replace(PUNCTUATION, '');
  return s.replace(WHITESPACE, ' ').trim();
}

/** Texts of the reference's candidates; a null or empty entry in "any of these" is no candidate. */
export function referenceTexts(reference: unknown): string[] {
  return referenceCandidates(reference).filter(isPresent).map(contentText);
}

/** `6`, `0.25`, `1234.57`: enough digits for an explanation, no float noise. */
export function formatNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Number(n.toPrecision(6)));
}

/** `email: 2, phone: 1` — counts per kind, for explanations that must not carry values. */
export function formatCounts(counts: ReadonlyMap<string, number>): string {
  return [...counts].map(([k, n]) => `${k}: ${n}`).join(', ');
}

// ---------------------------------------------------------------------------------------------
// The `within` score

export const WITHIN_SCORE: ScoreSpec = { name: 'within', kind: 'passed' };

/** One measured quantity and its optional inclusive bounds. */
export interface Bound {
  label: string;
  value: number;
  min?: number | undefined;
  max?: number | undefined;
  unit?: string;
}

/**
 * The `within` score over every bound that is set, or undefined when none is: an evaluator only
 * reports `within` when its caller asked for a bound.
 */
export function withinScore(bounds: readonly Bound[]): Score | undefined {
  const set = bounds.filter((b) => b.min !== undefined || b.max !== undefined);
  if (set.length === 0) return undefined;
  const show = (b: Bound, n: number) => `${formatNumber(n)}${b.unit ? ` ${b.unit}` : ''}`;
  const broken: string[] = [];
  for (const b of set) {
    if (b.min !== undefined && b.value < b.min) {
      broken.push(`${b.label} ${show(b, b.value)} is below the minimum ${show(b, b.min)}`);
    }
    if (b.max !== undefined && b.value > b.max) {
      broken.push(`${b.label} ${show(b, b.value)} is above the maximum ${show(b, b.max)}`);
    }
  }
  const explanation =
    broken.length > 0
      ? broken.join('; ')
      : set
          .map((b) => {
            const range = [
              b.min === undefined ? '' : `≥ ${show(b, b.min)}`,
              b.max === undefined ? '' : `≤ ${show(b, b.max)}`,
            ].filter((s) => s !== '');
            return `${b.label} ${show(b, b.value)} is ${range.join(' and ')}`;
          })
          .join('; ');
  return { name: WITHIN_SCORE.name, passed: broken.length === 0, explanation };
}

// ---------------------------------------------------------------------------------------------
// Tool calls

/** The trajectory's tool steps, in order. */
export function toolSteps(record: EvalRecord): Step[] {
  return (record.trajectory ?? []).filter((s) => s.type === 'tool');
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Tool arguments as JSON when they parse, else as whitespace-collapsed text: records keep raw
 * argument strings because malformed arguments are themselves evaluable. No arguments at all
 * counts as `{}`, the form most frameworks send for an argument-less call.
 */
export type Arguments = { json: true; value: unknown } | { json: false; text: string };

export function parseArguments(raw: unknown): Arguments {
  if (raw === undefined || raw === null) return { json: true, value: {} };
  if (typeof raw !== 'string') return { json: true, value: raw };
  const text = raw.trim();
  if (text === '') return { json: true, value: {} };
  try {
    return { json: true, value: JSON.parse(text) };
  } catch {
    return { json: false, text: text.replace(WHITESPACE, ' ') };
  }
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isObject(value)) return value;
  // A null prototype keeps a `__proto__` key an ordinary key.
  const out: Record<string, unknown> = Object.create(null);
  for (const key of Object.keys(value).sort()) out[key] = sortKeys(value[key]);
  return out;
}

/** JSON with object keys sorted at every level, so equal values serialize equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'null';
}

/** A comparable key for a call's arguments: canonical JSON, or the collapsed raw text. */
export function argumentsKey(args: Arguments): string {
  return args.json ? `json:${canonicalJson(args.value)}` : `text:${args.text}`;
}

/** A call a reference expects; `arguments` absent means any arguments will do. */
export interface ExpectedCall {
  name: string;
  arguments?: Arguments;
}

/** A value that may be JSON sent as text (datasets often store structured references so). */
function fromJsonText(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const text = value.trim();
  if (!text.startsWith('{') && !text.startsWith('[')) return value;
  try {
    return JSON.parse(text);
  } catch {
    return value;
  }
}

// `null`: an item that is not a tool call (a non-tool trajectory step), skipped;
// `undefined`: not a call at all, so the list holding it is no list of calls.
function expectedCall(item: unknown): ExpectedCall | null | undefined {
  if (typeof item === 'string') return item === '' ? undefined : { name: item };
  if (!isObject(item)) return undefined;
  if (typeof item.type === 'string' && item.type !== 'tool' && item.type !== 'function') {
    return null;
  }
  // OpenAI's shape nests the call: {type: 'function', function: {name, arguments}}.
  const call = isObject(item.function) ? item.function : item;
  if (typeof call.name !== 'string' || call.name === '') return undefined;
  return call.arguments === undefined
    ? { name: call.name }
    : { name: call.name, arguments: parseArguments(call.arguments) };
}

function callList(value: unknown): ExpectedCall[] | undefined {
  if (isObject(value)) {
    const list = value.toolCalls ?? value.tool_calls ?? value.trajectory;
    return Array.isArray(list) ? callList(list) : undefined;
  }
  if (!Array.isArray(value)) return undefined;
  const calls: ExpectedCall[] = [];
  for (const item of value) {
    const call = expectedCall(item);
    if (call === undefined) return undefined;
    if (call !== null) calls.push(call);
  }
  return calls;
}

/**
 * The expected tool calls a reference names, as candidates ("any of these"). One expectation is
 * a list of tool names or call objects (`{name, arguments?}`, or OpenAI's `{function: {…}}`), or
 * an object holding such a list under `toolCalls`, `tool_calls` or `trajectory`; a list of
 * expectations is a list of candidates. Any of these may arrive as JSON text. Candidates that
 * expect no call are dropped, so an empty answer means "the reference names no tools".
 */
export function expectedToolCalls(reference: unknown): ExpectedCall[][] {
  const value = fromJsonText(reference);
  const single = callList(value);
  if (single !== undefined) return single.length > 0 ? [single] : [];
  if (!Array.isArray(value)) return [];
  return value
    .map((candidate) => callList(fromJsonText(candidate)))
    .filter((calls): calls is ExpectedCall[] => calls !== undefined && calls.length > 0);
}

/** Counts of each name, for multiset comparisons of tool calls. */
export function countNames(names: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const n of names) counts.set(n, (counts.get(n) ?? 0) + 1);
  return counts;
}

/** What `a` has more of than `b`, as a multiset: `{search: 2}` means two calls too many. */
export function multisetExcess(
  a: ReadonlyMap<string, number>,
  b: ReadonlyMap<string, number>,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, n] of a) {
    const extra = n - (b.get(name) ?? 0);
    if (extra > 0) out.set(name, extra);
  }
  return out;
}
