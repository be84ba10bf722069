/**
 * @module runs/targets
 * What produces a run's outputs: the `target` (openai-compatible, http, command), `harness`
 * (single-turn, chat) and `environment` parts of a run spec, and `createTarget`, which builds a
 * target under the rules of the place executing the run (grants, command targets, outbound
 * hosts). HTTP goes out only through `net`; imports `core`, `config` (durations) and `net`, never
 * a store, `api/` or `cli/`.
 */
export type {
  GrantCheck,
  Target,
  TargetCall,
  TargetDeps,
  TargetOutput,
} from './contract.js';
export { COMMAND_GRANT_HOST, createTarget, preflightTarget } from './create.js';
export { TargetErrors } from './error-codes.js';
export { ALLOW_HOSTS_SETTING } from './outbound.js';
export {
  CommandTargetSchema,
  type CommandTargetSpec,
  DEFAULT_CALL_TIMEOUT_MS,
  type Environment,
  type EnvironmentInput,
  EnvironmentSchema,
  HARNESSES,
  type Harness,
  HarnessSchema,
  HttpTargetSchema,
  type HttpTargetSpec,
  OpenAiTargetSchema,
  type OpenAiTargetSpec,
  type TargetSpec,
  type TargetSpecInput,
  TargetSpecSchema,
} from './schema.js';
