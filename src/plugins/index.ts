/**
 * @module plugins
 * Sandboxed WebAssembly plug-in evaluators ("wasi-json v1", docs/plugins.md): the trust chain
 * (config → index → manifest → module, each pinned by sha256), module acceptance, the project's own
 * deterministic WASI preview1 layer, the worker pool with its deadline and memory cap, and the
 * evaluator types registered for each declared evaluator. Imports core and evaluators only.
 */
export { PluginErrors } from './error-codes.js';
export {
  defaultWorkers,
  PluginHost,
  type PluginHostDeps,
  type PluginHostSettings,
  REQUEST_ABI,
  type ReloadEvent,
} from './host.js';
export { sha256Hex } from './loader.js';
