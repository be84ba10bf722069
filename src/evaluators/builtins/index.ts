/**
 * @module evaluators/builtins
 * The deterministic built-in evaluators (no model calls, all `cheap`), one factory and manifest
 * each, registered in one static list. Imports core and ../contract.js only (plus zod, re2 and
 * ajv).
 */
import type { EvaluatorFactory } from '../contract.js';
import { contains } from './contains.js';
import { exactMatch } from './exact-match.js';
import { fuzzyMatch } from './fuzzy-match.js';
import { jsonSchema, jsonValid } from './json.js';
import { piiLeak, secretLeak } from './leaks.js';
import { length } from './length.js';
import { loopDetection } from './loop-detection.js';
import { numericMatch } from './numeric-match.js';
import { regexMatch } from './regex-match.js';
import { stepBudget } from './step-budget.js';
import { toolCallAccuracy } from './tool-call-accuracy.js';
import { toolErrors } from './tool-errors.js';
import { trajectoryMatch } from './trajectory-match.js';
import { cost, latency, tokenUsage } from './usage.js';

export const builtinEvaluators: EvaluatorFactory[] = [
  // output against reference
  exactMatch,
  contains,
  regexMatch,
  fuzzyMatch,
  numericMatch,
  // output shape
  jsonValid,
  jsonSchema,
  length,
  // usage
  latency,
  tokenUsage,
  cost,
  // trajectory
  toolErrors,
  loopDetection,
  trajectoryMatch,
  toolCallAccuracy,
  stepBudget,
  // safety
  piiLeak,
  secretLeak,
];
