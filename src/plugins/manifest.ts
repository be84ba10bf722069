import { z } from 'zod';

/**
 * The plug-in index and manifest, both YAML or JSON and both hashed as the exact bytes of their
 * files (no canonical form): the server config pins the index, the index pins each manifest, a
 * manifest pins its module.
 */

const API_VERSION = 'touchstone.dev/v1alpha1';
const Sha256Schema = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits');
/** A file beside the one naming it: relative, and never climbing out of its directory. */
const RelativeFileSchema = z
  .string()
  .min(1)
  .refine((p) => !p.startsWith('/') && !p.split(/[\\/]/).includes('..'), {
    message: 'a path relative to this file, without ".."',
  });

/** Evaluator names share the space of built-in types; a dotted prefix (`acme.rubric`) avoids clashes. */
export const EVALUATOR_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

export const PLUGIN_NEEDS = ['input', 'output', 'reference', 'context', 'trajectory'] as const;

export const PluginIndexSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('EvaluatorPluginIndex'),
  entries: z
    .array(
      z.strictObject({
        name: z.string().min(1).max(128),
        version: z.string().min(1).max(64).optional(),
        manifest: z.strictObject({ file: RelativeFileSchema, sha256: Sha256Schema }),
      }),
    )
    .max(256),
});
export type PluginIndex = z.infer<typeof PluginIndexSchema>;

const ScoreDeclSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/),
  kind: z.enum(['number', 'passed', 'label']),
  range: z.tuple([z.number(), z.number()]).optional(),
  higherIsBetter: z.boolean().optional(),
});

export const PluginManifestSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('EvaluatorPlugin'),
  metadata: z.strictObject({
    name: z.string().min(1).max(128),
    version: z.string().min(1).max(64),
  }),
  spec: z.strictObject({
    abi: z.literal('wasi-json/v1'),
    module: z.strictObject({
      file: RelativeFileSchema,
      sha256: Sha256Schema,
      size: z.int().positive().optional(),
    }),
    evaluators: z
      .array(
        z.strictObject({
          name: z.string().regex(EVALUATOR_NAME, 'lowercase letters, digits, "_", "." and "-"'),
          description: z.string().max(1024).default(''),
          /** Record fields the evaluator reads: a record without one is skipped, not scored. */
          needs: z.array(z.enum(PLUGIN_NEEDS)).default([]),
          scores: z.array(ScoreDeclSchema).min(1).max(64),
          /** JSON Schema of the evaluator's params; absent = an object with any fields. */
          paramsSchema: z.record(z.string(), z.unknown()).default({ type: 'object' }),
        }),
      )
      .min(1)
      .max(64),
    limits: z
      .strictObject({
        memoryMiB: z.int().positive().optional(),
        timeoutMs: z.int().positive().optional(),
        maxOutputBytes: z.int().positive().optional(),
      })
      .default({}),
    /** How the module was built (toolchain, command, source digest); informational. */
    build: z.record(z.string(), z.unknown()).optional(),
  }),
});
export type PluginManifest = z.infer<typeof PluginManifestSchema>;
export type PluginEvaluatorDecl = PluginManifest['spec']['evaluators'][number];
