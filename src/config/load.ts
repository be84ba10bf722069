import { readFileSync } from 'node:fs';
import {
  CoreErrors,
  describeYamlProblem,
  type ErrorDetail,
  issuesToDetails,
  parseYaml,
} from '../core/index.js';
import { DEFAULTS } from './defaults.js';
import { isLoopbackListen } from './listen.js';
import { type Config, ConfigSchema } from './schema.js';

/**
 * Layered configuration: defaults → standard proxy variables → YAML file → `TOUCHSTONE_*`
 * environment → flags. Every invalid key is reported at once with its path; the result is frozen.
 */

export const ENV_PREFIX = 'TOUCHSTONE_';

/** Environment variables that are not config keys (read elsewhere by name). */
const NON_CONFIG_ENV = new Set([
  'TOUCHSTONE_TEST_PG',
  'TOUCHSTONE_API_KEY',
  'TOUCHSTONE_SERVER',
  'TOUCHSTONE_CONFIG_DIR',
  'TOUCHSTONE_OTLP_ENDPOINT',
  // Test and CI plumbing.
  'TOUCHSTONE_INTEROP_PYTHON',
  'TOUCHSTONE_INTEROP_MLFLOW_PYTHON',
  'TOUCHSTONE_INTEROP_PHOENIX_PYTHON',
  'TOUCHSTONE_INTEROP_MOTO_PYTHON',
  'TOUCHSTONE_SDK_PYTHON',
  'TOUCHSTONE_BENCH_PG',
  'TOUCHSTONE_CI_CACHE',
  'TOUCHSTONE_BENCH_PHOENIX',
  'TOUCHSTONE_BENCH_MLFLOW',
  'TOUCHSTONE_BENCH_LANGFUSE',
  'TOUCHSTONE_CHROMIUM',
  'TOUCHSTONE_TEST_WORKERS',
  'TOUCHSTONE_TEST_DIST',
  'TOUCHSTONE_KUBE_APISERVER',
  'TOUCHSTONE_KUBE_APISERVER_BUILD_TIMEOUT',
  'TOUCHSTONE_ETCD',
  'TOUCHSTONE_DOCKERFILE_LINT',
]);

type Tree = { [key: string]: unknown };

export interface LoadOptions {
  /** YAML config file path. */
  file?: string;
  /** The process environment (passed in; config never reads process.env itself). */
  env?: Record<string, string | undefined>;
  /** Flag overrides, already in config shape (e.g. `{listen: '…', no_auth: true}`). */
  overrides?: Tree;
}

function isTree(v: unknown): v is Tree {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function merge(base: Tree, over: Tree): Tree {
  const out: Tree = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const prev = out[k];
    out[k] = isTree(prev) && isTree(v) ? merge(prev, v) : v;
  }
  return out;
}

/** `TOUCHSTONE_STORE__DRIVER=postgres` → `{store: {driver: 'postgres'}}`; values parsed as YAML scalars. */
export function envLayer(env: Record<string, string | undefined>): Tree {
  let tree: Tree = {};
  for (const [name, raw] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || raw === undefined || NON_CONFIG_ENV.has(name)) continue;
    const path = name.slice(ENV_PREFIX.length).toLowerCase().split('__');
    // One YAML scalar or collection; anything else (not YAML, empty, null) is kept as text.
    const parsed = parseYaml(raw);
    const value: unknown = parsed.ok && parsed.documents.length === 1 ? parsed.documents[0] : raw;
    let leaf: unknown = value;
    for (let i = path.length - 1; i >= 0; i--) leaf = { [path[i] as string]: leaf };
    tree = merge(tree, leaf as Tree);
  }
  return tree;
}

/** The standard proxy variables; the first set (non-blank) spelling wins, lower case first. */
const PROXY_ENV: Record<string, readonly string[]> = {
  https_proxy: ['https_proxy', 'HTTPS_PROXY'],
  http_proxy: ['http_proxy', 'HTTP_PROXY'],
  no_proxy: ['no_proxy', 'NO_PROXY'],
};

/**
 * `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` (either case) as the `proxy` section. They act as
 * defaults: the config file and `TOUCHSTONE_PROXY__*` override them key by key, so a deployment
 * can opt out of an inherited proxy with `proxy: {no_proxy: "*"}`.
 */
export function proxyEnvLayer(env: Record<string, string | undefined>): Tree {
  const proxy: Tree = {};
  for (const [key, names] of Object.entries(PROXY_ENV)) {
    for (const name of names) {
      const value = env[name];
      if (value !== undefined && value.trim() !== '') {
        proxy[key] = value.trim();
        break;
      }
    }
  }
  return Object.keys(proxy).length === 0 ? {} : { proxy };
}

function fileLayer(file: string): Tree {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw CoreErrors.INVALID_ARGUMENT(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  const parsed = parseYaml(text);
  if (!parsed.ok) {
    const { problem } = parsed;
    throw CoreErrors.INVALID_ARGUMENT(
      `config file ${file} is not valid YAML: ${describeYamlProblem(problem)}`,
      {
        details: [
          {
            path: problem.line === undefined ? '(file)' : `line ${problem.line}`,
            message: problem.message,
          },
        ],
      },
    );
  }
  if (parsed.documents.length > 1) {
    throw CoreErrors.INVALID_ARGUMENT(`config file ${file} must hold one YAML document`);
  }
  const value: unknown = parsed.documents[0];
  if (value === null || value === undefined) return {};
  if (!isTree(value)) throw CoreErrors.INVALID_ARGUMENT(`config file ${file} must hold a mapping`);
  return value;
}

export function loadConfig(options: LoadOptions = {}): Readonly<Config> {
  let tree: Tree = proxyEnvLayer(options.env ?? {});
  if (options.file !== undefined) tree = merge(tree, fileLayer(options.file));
  tree = merge(tree, envLayer(options.env ?? {}));
  tree = merge(tree, options.overrides ?? {});
  const parsed = ConfigSchema.safeParse(tree);
  const details = [
    ...listenRule(tree),
    ...(parsed.success ? [] : issuesToDetails(parsed.error.issues)),
  ];
  if (!parsed.success || details.length > 0) {
    throw CoreErrors.INVALID_ARGUMENT(
      `invalid configuration:\n${details.map((d) => `  ${d.path}: ${d.message}`).join('\n')}`,
      { details },
    );
  }
  return deepFreeze(parsed.data);
}

/**
 * Off loopback, callers must authenticate unless the operator opts out. Checked on the raw tree so
 * it is reported together with every other problem (zod skips refinements of an invalid object).
 */
function listenRule(tree: Tree): ErrorDetail[] {
  const listen = typeof tree.listen === 'string' ? tree.listen : DEFAULTS.listen;
  if (tree.auth !== undefined || tree.no_auth === true || isLoopbackListen(listen)) return [];
  return [
    {
      path: 'auth',
      message: `listening on ${listen} (not loopback) requires an auth section, or --no-auth to run open on purpose`,
    },
  ];
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
