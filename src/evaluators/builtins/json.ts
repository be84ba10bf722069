import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import RE2 from 're2';
import { z } from 'zod';
import { CoreErrors, isTextContent, outputText } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import { booleanParam } from './shared.js';

/** The body of a ```` ```json ```` (or bare ```` ``` ````) fence when it is the whole text. */
function unfence(text: string): string {
  const t = text.trim();
  if (!t.startsWith('```') || !t.endsWith('```') || t.length < 6) return text;
  const newline = t.indexOf('\n');
  if (newline < 0 || newline > t.length - 3) return text;
  const info = t.slice(3, newline).trim().toLowerCase();
  if (info !== '' && info !== 'json') return text;
  const body = t.slice(newline + 1, -3);
  return body.includes('```') ? text : body;
}

type Parsed = { ok: true; value: unknown } | { ok: false; explanation: string };

/** The output as a JSON value; failures explained without quoting the output. */
function parseOutput(output: unknown, allowFence: boolean): Parsed {
  if (!isTextContent(output)) return { ok: true, value: output };
  const raw = outputText(output);
  const text = allowFence ? unfence(raw) : raw;
  if (text.trim() === '') return { ok: false, explanation: 'the output is empty' };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    // V8 messages quote the text; only the position is safe to repeat.
    const position = /at position (\d+)/.exec(err instanceof Error ? err.message : '')?.[1];
    const where = position === undefined ? '' : ` (error at character ${position})`;
    return { ok: false, explanation: `the output is not valid JSON${where}` };
  }
}

const allowFence = booleanParam(true);

/** The output parses as JSON, optionally from a single fenced block. */
export const jsonValid = defineEvaluator({
  manifest: {
    type: 'json-valid',
    description:
      'Output is valid JSON (text that parses, optionally inside one ```json fence, or a JSON value already).',
    needs: ['output'],
    scores: [{ name: 'json-valid', kind: 'passed' }],
    params: z.strictObject({ allowFence }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const parsed = parseOutput(record.output, params.allowFence);
        return {
          scores: [
            {
              name: 'json-valid',
              passed: parsed.ok,
              explanation: parsed.ok ? 'the output is valid JSON' : parsed.explanation,
            },
          ],
        };
      },
    };
  },
});

/** A `pattern` or `patternProperties` regex that RE2 cannot run (lookaround, backreferences). */
class UnsupportedPattern {
  constructor(readonly pattern: string) {}
}

/**
 * Schema regexes run on RE2, in time linear in the text: on V8's backtracking engine a pattern
 * such as `^(a+)+$` makes one output block the process for as long as it likes. Syntax RE2 cannot
 * run is refused when the schema is bound.
 */
const re2Engine = Object.assign(
  (pattern: string, flags: string) => {
    try {
      return new RE2(pattern, flags);
    } catch {
      throw new UnsupportedPattern(pattern);
    }
  },
  // How ajv's standalone code would import the engine; this module only compiles in process.
  { code: 'require("ajv/dist/runtime/re2").default' },
);

// strict: false follows the spec (unknown keywords such as OpenAPI's `example` are ignored);
// formats are annotations in 2020-12 and would need a format library. No remote $ref is ever
// loaded: compile() has no loader, so a schema that needs one fails at bind.
const AJV_OPTIONS = {
  strict: false,
  allErrors: true,
  validateFormats: false,
  logger: false,
  code: { regExp: re2Engine },
} as const;

interface SchemaCompiler {
  compile(schema: Record<string, unknown>): ValidateFunction;
}

const DIALECTS: { uri: RegExp; make: () => SchemaCompiler }[] = [
  {
    uri: /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/,
    make: () => new Ajv2020(AJV_OPTIONS),
  },
  {
    uri: /^https?:\/\/json-schema\.org\/draft\/2019-09\/schema#?$/,
    make: () => new Ajv2019(AJV_OPTIONS),
  },
  { uri: /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/, make: () => new Ajv(AJV_OPTIONS) },
];

function invalidSchema(message: string): Error {
  return CoreErrors.INVALID_ARGUMENT(`schema is invalid: ${message}`, {
    details: [{ path: 'schema', message }],
  });
}

/** Compiles a JSON Schema (draft 2020-12, 2019-09 or 07; patterns on RE2); throws `INVALID_ARGUMENT`. */
export function compileSchema(schema: Record<string, unknown>): ValidateFunction {
  const uri = schema.$schema;
  // Without $schema, the newest dialect.
  const dialect =
    uri === undefined
      ? DIALECTS[0]
      : DIALECTS.find((d) => typeof uri === 'string' && d.uri.test(uri));
  if (dialect === undefined) {
    throw invalidSchema('unsupported $schema; use draft 2020-12, 2019-09 or draft-07');
  }
  try {
    return dialect.make().compile(schema);
  } catch (err) {
    if (err instanceof UnsupportedPattern) {
      // Named by where it is (a JSON pointer into the schema), not by its text.
      const at = patternPointer(schema, err.pattern);
      throw invalidSchema(
        `${at === undefined ? 'a pattern' : `the pattern at ${at}`} uses syntax RE2 cannot run (lookaround, backreferences); schema patterns run on RE2 so that no output can stall validation`,
      );
    }
    throw invalidSchema(err instanceof Error ? err.message : String(err));
  }
}

/** Keywords whose values are data, not schemas: a `pattern` inside them is not a regex. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples', 'example']);

/** JSON pointer escaping (RFC 6901). */
function pointerToken(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** The JSON pointer of the first `pattern` or `patternProperties` key that is `pattern`. */
function patternPointer(node: unknown, pattern: string, at = ''): string | undefined {
  if (typeof node !== 'object' || node === null) return undefined;
  for (const [key, value] of Object.entries(node)) {
    const here = `${at}/${pointerToken(key)}`;
    if (Array.isArray(node)) {
      const found = patternPointer(value, pattern, here);
      if (found !== undefined) return found;
      continue;
    }
    if (DATA_KEYWORDS.has(key)) continue;
    if (key === 'pattern' && value === pattern) return here;
    if (key === 'patternProperties' && typeof value === 'object' && value !== null) {
      if (Object.hasOwn(value, pattern)) return `${here}/${pointerToken(pattern)}`;
    }
    const found = patternPointer(value, pattern, here);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** The deepest failure is the most specific one (anyOf and oneOf also report their own). */
function mainError(errors: readonly ErrorObject[]): ErrorObject | undefined {
  let best: ErrorObject | undefined;
  let bestDepth = -1;
  for (const e of errors) {
    const depth = e.instancePath === '' ? 0 : e.instancePath.split('/').length;
    if (depth > bestDepth) {
      best = e;
      bestDepth = depth;
    }
  }
  return best;
}

/**
 * The output validates against a JSON Schema (2020-12 unless `$schema` names 2019-09 or
 * draft-07). A failure names the instance path and the rule, never the offending value.
 */
export const jsonSchema = defineEvaluator({
  manifest: {
    type: 'json-schema',
    description:
      'Output is JSON that validates against the `schema` param (JSON Schema 2020-12, 2019-09 or draft-07); failures name the instance path.',
    needs: ['output'],
    scores: [{ name: 'json-schema', kind: 'passed' }],
    params: z.strictObject({
      schema: z.record(z.string(), z.unknown()),
      allowFence,
    }),
    cheap: true,
  },
  bind(params) {
    const validate = compileSchema(params.schema);
    return {
      evaluate(record) {
        const parsed = parseOutput(record.output, params.allowFence);
        if (!parsed.ok) {
          return {
            scores: [{ name: 'json-schema', passed: false, explanation: parsed.explanation }],
          };
        }
        if (validate(parsed.value)) {
          return {
            scores: [
              { name: 'json-schema', passed: true, explanation: 'the output matches the schema' },
            ],
          };
        }
        const errors = validate.errors ?? [];
        const main = mainError(errors);
        const where =
          main === undefined
            ? ''
            : `${main.instancePath || '(root)'}: ${main.message ?? 'is invalid'}`;
        const more = errors.length > 1 ? ` (${errors.length} errors in all)` : '';
        return {
          scores: [
            {
              name: 'json-schema',
              passed: false,
              explanation: `${where || 'the output does not match the schema'}${more}`,
            },
          ],
        };
      },
    };
  },
});
