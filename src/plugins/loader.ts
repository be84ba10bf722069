import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { z } from 'zod';
import {
  describeDetails,
  describeYamlProblem,
  type ErrorFactory,
  issuesToDetails,
  parseYaml,
} from '../core/index.js';
import { PluginErrors } from './error-codes.js';
import {
  type PluginEvaluatorDecl,
  PluginIndexSchema,
  type PluginManifest,
  PluginManifestSchema,
} from './manifest.js';
import { acceptModule, ModuleRule, PAGE_BYTES } from './module-check.js';

/**
 * Walks the trust chain config → index → manifests → modules, checking every sha256 on the exact
 * bytes read, and compiles each accepted module once per (sha256, memory cap). Anything that does
 * not match is refused with the file and both hashes named; there is no unpinned fallback.
 */

export interface PluginSettings {
  index: string;
  index_sha256?: string | undefined;
  index_sha256_file?: string | undefined;
  limits: {
    memory_mib: number;
    max_memory_mib: number;
    timeout: number;
    max_timeout: number;
    max_output_bytes: number;
    max_input_bytes: number;
    max_module_bytes: number;
  };
}

export interface RunLimits {
  timeoutMs: number;
  maxOutputBytes: number;
  maxInputBytes: number;
}

export interface LoadedPlugin {
  name: string;
  version: string;
  manifestFile: string;
  manifestSha256: string;
  moduleSha256: string;
  /** Key of the compiled module: its sha256 and the memory cap it was compiled with. */
  moduleKey: string;
  module: WebAssembly.Module;
  evaluators: PluginEvaluatorDecl[];
  limits: RunLimits;
}

export interface LoadedChain {
  indexSha256: string;
  plugins: LoadedPlugin[];
}

const MAX_TEXT_BYTES = 1024 * 1024;

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function read(file: string, what: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'read error';
    throw PluginErrors.PLUGIN_FILE_UNREADABLE(`cannot read the ${what} ${file} (${code})`);
  }
}

function checkHash(
  bytes: Uint8Array,
  pinned: string,
  what: string,
  file: string,
  pinnedBy: string,
) {
  const actual = sha256Hex(bytes);
  if (actual !== pinned) {
    throw PluginErrors.PLUGIN_HASH_MISMATCH(
      `the ${what} ${file} has sha256 ${actual}, but ${pinnedBy} pins ${pinned}; it is refused`,
    );
  }
  return actual;
}

/** The index's pin: inline, or the first word of its pin file (`sha256sum` output). */
async function indexPin(settings: PluginSettings): Promise<{ sha256: string; by: string }> {
  if (settings.index_sha256 !== undefined) {
    return { sha256: settings.index_sha256, by: 'plugins.index_sha256' };
  }
  const file = settings.index_sha256_file as string;
  const text = (await read(file, 'index pin file')).toString('utf8').trim();
  const word = text.split(/\s+/)[0] ?? '';
  if (!/^[0-9a-f]{64}$/.test(word)) {
    throw PluginErrors.PLUGIN_INDEX_INVALID(
      `the index pin file ${file} does not start with a sha256 (64 lowercase hex digits)`,
    );
  }
  return { sha256: word, by: `the pin file ${file}` };
}

function parseDoc<S extends z.ZodType>(
  bytes: Buffer,
  schema: S,
  file: string,
  error: ErrorFactory,
): z.infer<S> {
  if (bytes.length > MAX_TEXT_BYTES) throw error(`${file} is over ${MAX_TEXT_BYTES} bytes`);
  const parsed = parseYaml(bytes.toString('utf8'), { maxBytes: MAX_TEXT_BYTES });
  if (!parsed.ok)
    throw error(`${file} is not valid YAML or JSON: ${describeYamlProblem(parsed.problem)}`);
  if (parsed.documents.length !== 1) throw error(`${file} must hold exactly one document`);
  const result = schema.safeParse(parsed.documents[0]);
  if (!result.success) {
    const details = issuesToDetails(result.error.issues, '');
    throw error(`${file} is invalid: ${describeDetails(details)}`, { details });
  }
  return result.data;
}

function runLimits(manifest: PluginManifest, settings: PluginSettings, file: string) {
  const l = settings.limits;
  const asked = manifest.spec.limits;
  const over = (value: number | undefined, max: number, field: string, key: string) => {
    if (value !== undefined && value > max) {
      throw PluginErrors.PLUGIN_MANIFEST_INVALID(
        `${file}: spec.limits.${field} ${value} is over the server's plugins.limits.${key} ${max}`,
      );
    }
  };
  over(asked.memoryMiB, l.max_memory_mib, 'memoryMiB', 'max_memory_mib');
  over(asked.timeoutMs, l.max_timeout, 'timeoutMs', 'max_timeout');
  over(asked.maxOutputBytes, l.max_output_bytes, 'maxOutputBytes', 'max_output_bytes');
  return {
    memoryPages: ((asked.memoryMiB ?? l.memory_mib) * 2 ** 20) / PAGE_BYTES,
    run: {
      timeoutMs: asked.timeoutMs ?? l.timeout,
      maxOutputBytes: asked.maxOutputBytes ?? l.max_output_bytes,
      maxInputBytes: l.max_input_bytes,
    },
  };
}

async function loadModule(
  file: string,
  bytes: Buffer,
  memoryPages: number,
  settings: PluginSettings,
  cache: Map<string, WebAssembly.Module>,
): Promise<{ key: string; module: WebAssembly.Module }> {
  const key = `${sha256Hex(bytes)}:${memoryPages}`;
  const cached = cache.get(key);
  if (cached !== undefined) return { key, module: cached };
  let patched: Uint8Array;
  try {
    patched = acceptModule(bytes, { maxBytes: settings.limits.max_module_bytes, memoryPages });
  } catch (err) {
    if (!(err instanceof ModuleRule)) throw err;
    throw PluginErrors.PLUGIN_MODULE_REFUSED(`the module ${file} is refused: ${err.message}`);
  }
  let module: WebAssembly.Module;
  try {
    module = await WebAssembly.compile(patched);
  } catch (err) {
    const why = err instanceof Error ? err.message.slice(0, 200) : 'compile error';
    throw PluginErrors.PLUGIN_MODULE_REFUSED(`the module ${file} does not compile: ${why}`);
  }
  cache.set(key, module);
  return { key, module };
}

async function loadEntry(
  entry: z.infer<typeof PluginIndexSchema>['entries'][number],
  indexFile: string,
  settings: PluginSettings,
  cache: Map<string, WebAssembly.Module>,
): Promise<LoadedPlugin> {
  const manifestFile = resolve(dirname(indexFile), entry.manifest.file);
  const manifestBytes = await read(manifestFile, 'plug-in manifest');
  const manifestSha256 = checkHash(
    manifestBytes,
    entry.manifest.sha256,
    'plug-in manifest',
    manifestFile,
    `the index entry "${entry.name}"`,
  );
  const manifest = parseDoc(
    manifestBytes,
    PluginManifestSchema,
    manifestFile,
    PluginErrors.PLUGIN_MANIFEST_INVALID,
  );
  const { name, version } = manifest.metadata;
  if (name !== entry.name || (entry.version !== undefined && entry.version !== version)) {
    throw PluginErrors.PLUGIN_MANIFEST_INVALID(
      `${manifestFile} declares ${name} ${version}, but the index entry names ${entry.name} ${entry.version ?? ''}`.trim(),
    );
  }
  const limits = runLimits(manifest, settings, manifestFile);
  const moduleFile = resolve(dirname(manifestFile), manifest.spec.module.file);
  const moduleBytes = await read(moduleFile, 'plug-in module');
  const moduleSha256 = checkHash(
    moduleBytes,
    manifest.spec.module.sha256,
    'plug-in module',
    moduleFile,
    `the manifest ${manifestFile}`,
  );
  const size = manifest.spec.module.size;
  if (size !== undefined && size !== moduleBytes.length) {
    throw PluginErrors.PLUGIN_MANIFEST_INVALID(
      `${manifestFile}: spec.module.size is ${size}, the module ${moduleFile} has ${moduleBytes.length} bytes`,
    );
  }
  const compiled = await loadModule(moduleFile, moduleBytes, limits.memoryPages, settings, cache);
  return {
    name,
    version,
    manifestFile,
    manifestSha256,
    moduleSha256,
    moduleKey: compiled.key,
    module: compiled.module,
    evaluators: manifest.spec.evaluators,
    limits: limits.run,
  };
}

/** Loads and verifies the whole chain; throws the first problem (a TouchstoneError). */
export async function loadChain(
  settings: PluginSettings,
  cache: Map<string, WebAssembly.Module>,
): Promise<LoadedChain> {
  const indexFile = resolve(settings.index);
  const pin = await indexPin(settings);
  const indexBytes = await read(indexFile, 'plug-in index');
  const indexSha256 = checkHash(indexBytes, pin.sha256, 'plug-in index', indexFile, pin.by);
  const index = parseDoc(
    indexBytes,
    PluginIndexSchema,
    indexFile,
    PluginErrors.PLUGIN_INDEX_INVALID,
  );
  const plugins: LoadedPlugin[] = [];
  for (const entry of index.entries) {
    plugins.push(await loadEntry(entry, indexFile, settings, cache));
  }
  return { indexSha256, plugins };
}
