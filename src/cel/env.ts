/**
 * The CEL environments of the three kinds of expression: their variables, the string extension
 * and the bounded functions, `matches` on RE2; and the same environments metered (cost.ts).
 */
import { type CelEnv, CelScalar, celEnv, listType, mapType } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import RE2 from 're2';
import { BOUNDED_FUNCS } from './bounded-funcs.js';
import { meteredEnv } from './metered-env.js';
import type { CheckKind } from './types.js';

const { BOOL, INT, DOUBLE, STRING, DYN } = CelScalar;

export const SELECTOR_VARIABLES = {
  service: STRING,
  name: STRING,
  duration: DOUBLE,
  error: BOOL,
  steps: INT,
  tools: listType(STRING),
  models: listType(STRING),
  attributes: mapType(STRING, DYN),
  resource: mapType(STRING, DYN),
  labels: mapType(STRING, STRING),
  project: STRING,
  source: STRING,
} as const;

export const WHEN_VARIABLES = { ...SELECTOR_VARIABLES, scores: mapType(STRING, DOUBLE) } as const;

export const OVERRIDE_VARIABLES = { ...SELECTOR_VARIABLES, input: STRING, output: STRING } as const;

/** `auth.rules`: who calls (`principal`), what for (`action`), on what (`resource`), and `mcp`. */
export const ACCESS_VARIABLES = {
  principal: mapType(STRING, DYN),
  action: STRING,
  resource: mapType(STRING, DYN),
  mcp: mapType(STRING, DYN),
} as const;

const REGEX_CACHE_SIZE = 256;
const regexCache = new Map<string, RE2>();

/** CEL's `matches` on RE2 (linear time: a pattern cannot stall the engine), compiled once. */
export function compileRegex(pattern: string): RE2 {
  let re = regexCache.get(pattern);
  if (re === undefined) {
    try {
      re = new RE2(pattern, 'u');
    } catch {
      // The engine's message quotes the pattern, which may come from trace content.
      throw new Error('invalid regular expression');
    }
    if (regexCache.size >= REGEX_CACHE_SIZE) regexCache.clear();
    regexCache.set(pattern, re);
  }
  return re;
}

const re2 = { compile: (pattern: string) => compileRegex(pattern) };

export const envs: Record<CheckKind, CelEnv> = {
  selector: celEnv({ variables: SELECTOR_VARIABLES, funcs: [...strings, ...BOUNDED_FUNCS], re2 }),
  when: celEnv({ variables: WHEN_VARIABLES, funcs: [...strings, ...BOUNDED_FUNCS], re2 }),
  override: celEnv({ variables: OVERRIDE_VARIABLES, funcs: [...strings, ...BOUNDED_FUNCS], re2 }),
  access: celEnv({ variables: ACCESS_VARIABLES, funcs: [...strings, ...BOUNDED_FUNCS], re2 }),
};

/** What expressions are planned with: the same environments, every function call charged. */
export const meteredEnvs: Record<CheckKind, CelEnv> = {
  selector: meteredEnv(envs.selector),
  when: meteredEnv(envs.when),
  override: meteredEnv(envs.override),
  access: meteredEnv(envs.access),
};
