import { z } from 'zod';
import { durationMs } from '../../config/index.js';
import { parseJsonPath } from './json-path.js';
import { PLACEHOLDERS, renderTemplate, unknownPlaceholders } from './template.js';

/**
 * The `target`, `harness` and `environment` parts of a run spec. Durations are Go-style strings
 * (`30s`) on input and milliseconds after parsing. Every object is strict so a misspelt field is
 * named instead of silently ignored.
 */

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** An environment variable name (the value is read at run time, never written in a spec). */
export const EnvNameSchema = z
  .string()
  .regex(ENV_NAME, 'must be an environment variable name (letters, digits, _)');

const HttpUrlSchema = z.string().refine((text) => {
  try {
    const url = new URL(text);
    return (
      (url.protocol === 'http:' || url.protocol === 'https:') &&
      url.username === '' &&
      url.password === ''
    );
  } catch {
    return false;
  }
}, 'must be an absolute http(s) URL without credentials in it');

/** Per-call timeout bounds: a target call that needs more than an hour is a job, not a call. */
const CallTimeoutSchema = durationMs.pipe(
  z.number().min(1, 'must be at least 1ms').max(3_600_000, 'must be at most 1h'),
);

const common = {
  /** Calls in flight at once for this target (the executor's limit). */
  concurrency: z.int().min(1).max(256).optional(),
  /** Overrides `environment.timeout` for this target's calls. */
  timeout: CallTimeoutSchema.optional(),
};

/** Request fields a spec may not set through `params`: the target owns them. */
const RESERVED_PARAMS = ['model', 'messages', 'stream', 'n'];

export const OpenAiParamsSchema = z
  .looseObject({
    temperature: z.number().min(0).max(2).optional(),
    max_tokens: z.int().min(1).optional(),
    max_completion_tokens: z.int().min(1).optional(),
    top_p: z.number().min(0).max(1).optional(),
    seed: z.int().optional(),
    stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
  })
  .superRefine((params, ctx) => {
    for (const key of RESERVED_PARAMS) {
      if (Object.hasOwn(params, key)) {
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `is set by the target and may not be given in params`,
        });
      }
    }
  });

export const OpenAiTargetSchema = z.strictObject({
  kind: z.literal('openai-compatible'),
  /** Base URL of the API, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  baseUrl: HttpUrlSchema,
  model: z.string().min(1).max(256),
  /** Environment variable holding the API key, sent as `Authorization: Bearer …`. */
  apiKeyEnv: EnvNameSchema.optional(),
  systemPrompt: z.string().max(1_000_000).optional(),
  params: OpenAiParamsSchema.default({}),
  /** Further attempts after a 408, 429 or 5xx answer or a dropped connection. */
  retries: z.int().min(0).max(10).default(2),
  ...common,
});

/** Header names whose values are secrets: these take `{env: NAME}` only, never a literal. */
const SECRET_HEADER =
  /(^authorization$|^proxy-authorization$|^cookie$|key|token|secret|passw|auth)/i;

export const HeaderValueSchema = z.union([
  z.string().max(8192),
  z.strictObject({
    env: EnvNameSchema,
    /** Written before the variable's value, e.g. `Bearer `. */
    prefix: z.string().max(64).optional(),
  }),
]);

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the client computes; a spec setting them would corrupt the request. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);

export const HttpTargetSchema = z
  .strictObject({
    kind: z.literal('http'),
    url: HttpUrlSchema,
    method: z.enum(['POST', 'PUT', 'PATCH']).default('POST'),
    headers: z
      .record(z.string(), HeaderValueSchema)
      .default({})
      .superRefine((headers, ctx) => {
        for (const [name, value] of Object.entries(headers)) {
          if (!HEADER_NAME.test(name)) {
            ctx.addIssue({ code: 'custom', path: [name], message: 'is not a valid header name' });
          } else if (RESERVED_HEADERS.has(name.toLowerCase())) {
            ctx.addIssue({ code: 'custom', path: [name], message: 'is set by the client' });
          } else if (typeof value === 'string' && SECRET_HEADER.test(name)) {
            ctx.addIssue({
              code: 'custom',
              path: [name],
              message: 'looks like a secret header: give its value as {env: NAME}, not a literal',
            });
          } else if (typeof value === 'string' && /[\r\n\0]/.test(value)) {
            ctx.addIssue({ code: 'custom', path: [name], message: 'contains a control character' });
          }
        }
      }),
    /**
     * The request body; `{{input}}` becomes the record's input (see `renderTemplate`), `{{recordId}}`
     * and `{{trial}}` the record id and trial number.
     */
    bodyTemplate: z
      .string()
      .max(1_000_000)
      .default('{"input": {{input}}}')
      .superRefine((template, ctx) => {
        const unknown = unknownPlaceholders(template);
        if (unknown.length > 0) {
          ctx.addIssue({
            code: 'custom',
            message: `unknown placeholder ${unknown.map((n) => `{{${n}}}`).join(', ')}; known: ${PLACEHOLDERS.map((n) => `{{${n}}}`).join(', ')}`,
          });
        }
      }),
    /** Where the output sits in the JSON answer (`$.choices[0].message.content`); `$` = all of it. */
    outputPath: z
      .string()
      .max(512)
      .default('$')
      .superRefine((path, ctx) => {
        const parsed = parseJsonPath(path);
        if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed });
      }),
    retries: z.int().min(0).max(10).default(2),
    ...common,
  })
  .superRefine((spec, ctx) => {
    // A JSON body (the default content type) must still be JSON once filled in.
    const type = Object.entries(spec.headers).find(
      ([n]) => n.toLowerCase() === 'content-type',
    )?.[1];
    const json = type === undefined || (typeof type === 'string' && /json/i.test(type));
    if (!json || unknownPlaceholders(spec.bodyTemplate).length > 0) return;
    try {
      JSON.parse(renderTemplate(spec.bodyTemplate, { input: 'x', recordId: 'r', trial: 0 }));
    } catch {
      ctx.addIssue({
        code: 'custom',
        path: ['bodyTemplate'],
        message:
          'is not valid JSON once the placeholders are filled in (set a content-type header for a non-JSON body)',
      });
    }
  });

export const CommandTargetSchema = z.strictObject({
  kind: z.literal('command'),
  /** Program and arguments, run without a shell. */
  argv: z.array(z.string().min(1).max(65_536)).min(1).max(1024),
  /**
   * How stdout is read: `text` (the output is the text, one trailing newline dropped), `json` (the
   * output is the parsed JSON value) or `record` (a JSON object `{output, trajectory?, usage?}`).
   */
  stdout: z.enum(['text', 'json', 'record']).default('text'),
  ...common,
});

/** What produces a run's outputs; absent when the dataset already holds them. */
export const TargetSpecSchema = z.discriminatedUnion('kind', [
  OpenAiTargetSchema,
  HttpTargetSchema,
  CommandTargetSchema,
]);
export type TargetSpec = z.infer<typeof TargetSpecSchema>;
export type TargetSpecInput = z.input<typeof TargetSpecSchema>;
export type OpenAiTargetSpec = z.infer<typeof OpenAiTargetSchema>;
export type HttpTargetSpec = z.infer<typeof HttpTargetSchema>;
export type CommandTargetSpec = z.infer<typeof CommandTargetSchema>;

export const HARNESSES = ['single-turn', 'chat'] as const;
/** `single-turn`: one call per record and trial; `chat`: the input's message list replayed turn by turn. */
export const HarnessSchema = z.enum(HARNESSES).default('single-turn');
export type Harness = z.infer<typeof HarnessSchema>;

export const DEFAULT_CALL_TIMEOUT_MS = 60_000;

export const EnvironmentSchema = z
  .strictObject({
    /**
     * Variables handed to a `command` target's process (with PATH). Each must be granted to the
     * run's project in `credentials.grants` when the run executes on a server.
     */
    env: z
      .array(EnvNameSchema)
      .max(256)
      .default([])
      .refine((names) => new Set(names).size === names.length, 'lists a variable twice'),
    /** A `command` target's working directory; relative paths resolve against the spec file. */
    workingDirectory: z.string().min(1).max(4096).optional(),
    /** Deadline of one target call (a whole chat replay counts per turn). */
    timeout: CallTimeoutSchema.prefault('60s'),
  })
  .prefault({});
export type Environment = z.infer<typeof EnvironmentSchema>;
export type EnvironmentInput = z.input<typeof EnvironmentSchema>;
