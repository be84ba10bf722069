import RE2 from 're2';
import type { Principal } from '../auth/index.js';
import { type AccessFacts, type CompiledAccessRule, compileAccessRule } from '../cel/index.js';
import { parseDuration } from '../config/index.js';
import { type ErrorDetail, isTouchstoneError } from '../core/index.js';
import { ALL_EVALUATORS, type BoundEvaluator, type Judge } from '../evaluators/index.js';
import {
  compileRedaction,
  PII_DETECTORS,
  REDACTED,
  type Redactor,
  SECRET_DETECTORS,
} from '../redaction/index.js';
import { injectionScore } from './injection.js';
import type { GuardCheckSpec, GuardCheckType } from './resource.js';
import type { GuardMessage, GuardPhase, GuardSubject } from './types.js';

/** Nesting of MCP arguments deeper than this is masked whole rather than walked. */
const MAX_ARGUMENT_DEPTH = 64;
const DEFAULT_PASS_THRESHOLD = 0.5;
const DEFAULT_INJECTION_THRESHOLD = 1;

/** What every check of one decision reads: the subject as masked by the checks before it. */
export interface CheckInput {
  readonly subject: GuardSubject;
  readonly messages: readonly GuardMessage[];
  readonly args: unknown;
  readonly principal: Principal;
  readonly project: string;
  readonly policy: string;
}

/** A hit carries the subject as masking would leave it (used when the action is `mask`). */
export type CheckResult = { hit: false } | { hit: true; messages: GuardMessage[]; args: unknown };

export interface CompiledCheck {
  readonly name: string;
  readonly type: GuardCheckType;
  readonly action: 'mask' | 'reject';
  readonly timeoutMs: number;
  readonly phases: ReadonlySet<GuardPhase>;
  /** Throws (or rejects) when it cannot decide; `signal` aborts a judge call at the deadline. */
  run(input: CheckInput, signal: AbortSignal): CheckResult | Promise<CheckResult>;
}

/** What compiling a check needs besides its spec: the configured judges. */
export interface CheckDeps {
  judges: ReadonlyMap<string, Judge>;
  defaultJudge?: string;
}

type TextMask = (text: string) => string;

/** Applies `mask` to every message and every string of the arguments; a hit if any changed. */
function maskAll(input: CheckInput, mask: TextMask): CheckResult {
  let hit = false;
  const messages = input.messages.map((m) => {
    const content = mask(m.content);
    if (content === m.content) return m;
    hit = true;
    return { role: m.role, content };
  });
  const args = mapStrings(
    input.args,
    (s) => {
      const out = mask(s);
      if (out !== s) hit = true;
      return out;
    },
    0,
  );
  return hit ? { hit, messages, args } : { hit: false };
}

/** The value with `fn` applied to every string (keys kept), copied only where it changed. */
export function mapStrings(value: unknown, fn: (s: string) => string, depth: number): unknown {
  if (typeof value === 'string') return fn(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_ARGUMENT_DEPTH) return REDACTED;
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((v) => {
      const m = mapStrings(v, fn, depth + 1);
      if (m !== v) changed = true;
      return m;
    });
    return changed ? out : value;
  }
  let changed = false;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const m = mapStrings(v, fn, depth + 1);
    if (m !== v) changed = true;
    Object.defineProperty(out, k, {
      value: m,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return changed ? out : value;
}

/** Replaces the ranges (start, end pairs, possibly overlapping) of `s` with REDACTED. */
function replaceRanges(s: string, ranges: number[]): string {
  if (ranges.length === 0) return s;
  const pairs: [number, number][] = [];
  for (let i = 0; i < ranges.length; i += 2) pairs.push([ranges[i]!, ranges[i + 1]!]);
  pairs.sort((a, b) => a[0] - b[0]);
  let out = '';
  let at = 0;
  for (const [start, end] of pairs) {
    if (end <= at) continue;
    out += s.slice(at, Math.max(start, at)) + REDACTED;
    at = end;
  }
  return out + s.slice(at);
}

/** Everything masked: what a hit of a check that cannot point at a part (CEL, judge) masks. */
function maskEverything(input: CheckInput): CheckResult {
  return {
    hit: true,
    messages: input.messages.map((m) => ({ role: m.role, content: REDACTED })),
    args: mapStrings(input.args, () => REDACTED, 0),
  };
}

function redactorCheck(redactor: Redactor): CompiledCheck['run'] {
  return (input) => {
    let hit = false;
    const messages = input.messages.map((m) => {
      const content = redactor.redactText(m.content);
      if (content === m.content) return m;
      hit = true;
      return { role: m.role, content };
    });
    const args = input.args === undefined ? undefined : redactor.redactJson(input.args);
    if (args !== input.args) hit = true;
    return hit ? { hit, messages, args } : { hit: false };
  };
}

function regexCheck(
  spec: Extract<GuardCheckSpec, { type: 'regex' }>,
  path: string,
): CompiledCheck['run'] {
  const problems: ErrorDetail[] = [];
  const flags = spec.caseInsensitive === true ? 'giu' : 'gu';
  const compiled: RE2[] = [];
  spec.patterns.forEach((pattern, i) => {
    try {
      compiled.push(new RE2(pattern, flags));
    } catch {
      // RE2's message quotes the pattern, which may itself be sensitive.
      problems.push({
        path: `${path}.patterns[${i}]`,
        message: 'not a valid RE2 regular expression',
      });
    }
  });
  if (problems.length > 0) throw new CheckProblems(problems);
  const mask: TextMask = (text) => {
    const ranges: number[] = [];
    for (const re of compiled) {
      re.lastIndex = 0;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        if (m[0].length === 0) {
          re.lastIndex = m.index + 1;
          continue;
        }
        ranges.push(m.index, m.index + m[0].length);
      }
    }
    return replaceRanges(text, ranges);
  };
  return (input) => maskAll(input, mask);
}

/** Roles whose text the operator wrote: injection heuristics do not read them. */
const OPERATOR_ROLES = new Set(['system', 'developer']);

function injectionCheck(threshold: number): CompiledCheck['run'] {
  return (input) => {
    let hit = false;
    const messages = input.messages.map((m) => {
      if (OPERATOR_ROLES.has(m.role)) return m;
      const { score, ranges } = injectionScore(m.content);
      if (score < threshold) return m;
      hit = true;
      return { role: m.role, content: replaceRanges(m.content, ranges) };
    });
    const args = mapStrings(
      input.args,
      (s) => {
        const { score, ranges } = injectionScore(s);
        if (score < threshold) return s;
        hit = true;
        return replaceRanges(s, ranges);
      },
      0,
    );
    return hit ? { hit, messages, args } : { hit: false };
  };
}

/** The variables a guard condition sees: the access-rule vocabulary, every key present. */
export function guardFacts(input: CheckInput): AccessFacts {
  const { subject, principal } = input;
  return {
    principal: {
      kind: principal.kind,
      subject: principal.subject ?? (principal.kind === 'key' ? principal.id : ''),
      email: principal.email ?? '',
      groups: principal.groups ?? [],
      project: principal.project ?? '',
      roles: principal.roles,
    },
    action: subject.phase,
    resource: {
      project: input.project,
      policy: { name: input.policy },
      headers: subject.headers,
      messages: input.messages,
    },
    mcp: {
      methodName: subject.mcp?.method ?? '',
      tool: { name: subject.mcp?.toolName ?? '', arguments: input.args ?? {} },
    },
  };
}

/** Why a CEL condition or a judge could not decide: the check's words, never the subject. */
export class CannotDecide extends Error {}

function celCheck(rule: CompiledAccessRule): CompiledCheck['run'] {
  return (input) => {
    const result = rule.evaluate(guardFacts(input));
    if (!result.ok) throw new CannotDecide(`condition could not be evaluated (${result.reason})`);
    return result.value ? maskEverything(input) : { hit: false };
  };
}

const LLM_JUDGE = ALL_EVALUATORS.find((f) => f.manifest.type === 'llm-judge');

function judgeCheck(
  spec: Extract<GuardCheckSpec, { type: 'judge' }>,
  path: string,
  deps: CheckDeps,
): CompiledCheck['run'] {
  const name = spec.judge ?? deps.defaultJudge;
  const judge = name === undefined ? undefined : deps.judges.get(name);
  if (judge === undefined || LLM_JUDGE === undefined) {
    throw new CheckProblems([
      {
        path: `${path}.judge`,
        message:
          name === undefined
            ? 'no judge named and no default_judge configured'
            : 'not a judge configured in `judges`',
      },
    ]);
  }
  const threshold = spec.passThreshold ?? DEFAULT_PASS_THRESHOLD;
  const bound: BoundEvaluator = LLM_JUDGE.bind({ rubric: spec.rubric, passThreshold: threshold });
  return async (input, signal) => {
    // The judge rates the last message (the prompt or the answer) in the light of the others.
    const last = input.messages.at(-1);
    const record = {
      id: 'guard',
      input: input.messages.slice(0, -1).map((m) => ({ role: m.role, content: m.content })),
      output: last?.content ?? '',
      ...(input.args === undefined ? {} : { metadata: { arguments: input.args } }),
    };
    const out = await bound.evaluate(record, { judge, signal });
    if (!('scores' in out)) throw new CannotDecide('judge could not rate the exchange');
    const passed = out.scores.find((s) => s.name === 'passed')?.passed;
    if (passed === undefined) throw new CannotDecide('judge gave no verdict');
    return passed ? { hit: false } : maskEverything(input);
  };
}

/** Problems found compiling a check, by field path (collected into GUARD_POLICY_INVALID). */
export class CheckProblems extends Error {
  constructor(readonly details: ErrorDetail[]) {
    super('invalid check');
  }
}

/** Compiles the check at `path` (`spec.checks[2]`); throws CheckProblems naming its fields. */
export function compileCheck(
  spec: GuardCheckSpec,
  index: number,
  path: string,
  deadlineMs: number,
  deps: CheckDeps,
): CompiledCheck {
  const timeoutMs = spec.timeout === undefined ? deadlineMs : (parseDuration(spec.timeout) ?? 0);
  if (timeoutMs > deadlineMs) {
    throw new CheckProblems([
      { path: `${path}.timeout`, message: 'longer than the decision deadline (spec.deadline)' },
    ]);
  }
  return {
    name: spec.name ?? `${spec.type}-${index}`,
    type: spec.type,
    action: spec.action,
    timeoutMs,
    phases: new Set(spec.phases ?? ['request', 'response']),
    run: runnerOf(spec, path, deps),
  };
}

function runnerOf(spec: GuardCheckSpec, path: string, deps: CheckDeps): CompiledCheck['run'] {
  switch (spec.type) {
    case 'pii':
      return redactorCheck(
        compileRedaction({
          pii: spec.detectors ?? PII_DETECTORS,
          secrets: false,
        }),
      );
    case 'secrets': {
      const enabled = spec.detectors ?? SECRET_DETECTORS;
      const disabled = SECRET_DETECTORS.filter((d) => !enabled.includes(d));
      return redactorCheck(compileRedaction({ secrets: { disabled } }));
    }
    case 'regex':
      return regexCheck(spec, path);
    case 'injection':
      return injectionCheck(spec.threshold ?? DEFAULT_INJECTION_THRESHOLD);
    case 'cel':
      try {
        return celCheck(compileAccessRule(spec.condition, `${path}.condition`));
      } catch (err) {
        if (isTouchstoneError(err)) throw new CheckProblems(err.details ?? []);
        throw err;
      }
    case 'judge':
      return judgeCheck(spec, path, deps);
  }
}
