/**
 * @module config
 * The server configuration: one zod schema tree, layered loading (defaults → YAML → env → flags)
 * with every error reported by path, and the defaults the spec names. Imports only core.
 */
export { DEFAULTS } from './defaults.js';
export { durationMs, parseDuration } from './duration.js';
export { isLoopbackHost, isLoopbackListen, isSecureOrLoopback, splitListen } from './listen.js';
export { envLayer, type LoadOptions, loadConfig, proxyEnvLayer } from './load.js';
export {
  type Config,
  ConfigSchema,
  type CredentialGrantConfig,
  CredentialGrantSchema,
  CredentialRefSchema,
  type JudgeConfig,
  JudgeConfigSchema,
  SECRET_DETECTOR_NAMES,
} from './schema.js';
