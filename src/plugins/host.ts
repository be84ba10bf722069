import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import type { ValidateFunction } from 'ajv';
import { z } from 'zod';
import type { EvalRecord } from '../core/index.js';
import {
  compileJsonSchema,
  defineEvaluator,
  type EvalOutput,
  type EvaluatorFactory,
  type EvaluatorRegistry,
} from '../evaluators/index.js';
import { PluginErrors } from './error-codes.js';
import { type LoadedChain, type LoadedPlugin, loadChain, type PluginSettings } from './loader.js';
import type { PluginEvaluatorDecl } from './manifest.js';
import { interpret } from './outcome.js';
import { WorkerPool } from './pool.js';

/**
 * The plug-in evaluators of a server: loads the verified chain, registers one evaluator type per
 * declared evaluator, runs records through the worker pool, and reloads the chain when the index
 * or its pin changes. A bound evaluator looks its plug-in up at each record, so policies compiled
 * before a reload run the reloaded module (its params checked again when the manifest changed).
 */

export interface PluginHostSettings extends PluginSettings {
  reload_interval: number;
  workers: number;
}

export type ReloadEvent =
  | { ok: true; indexSha256: string; plugins: { name: string; version: string; sha256: string }[] }
  | { ok: false; error: unknown };

export interface PluginHostDeps {
  registry: EvaluatorRegistry;
  /** Told of every reload that found a change: what loaded, or why the change was refused. */
  onReload?: (event: ReloadEvent) => void;
}

interface Entry {
  plugin: LoadedPlugin;
  decl: PluginEvaluatorDecl;
  validate: ValidateFunction;
}

/** The request's `abi` field; a module may check it to refuse a contract it does not speak. */
export const REQUEST_ABI = 'touchstone.evaluator.v1';
const RANDOM_LABEL = 'touchstone.plugin.random.v1';

export function defaultWorkers(): number {
  return Math.min(availableParallelism(), 4);
}

function sha256(...parts: (string | Uint8Array)[]): Buffer {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest();
}

function paramsIssues(validate: ValidateFunction, params: unknown): string | undefined {
  if (validate(params)) return undefined;
  const first = validate.errors?.[0];
  return `${first?.instancePath || '(root)'} ${first?.message ?? 'is invalid'}`;
}

export class PluginHost {
  readonly pool: WorkerPool;
  private readonly cache = new Map<string, WebAssembly.Module>();
  private entries = new Map<string, Entry>();
  private loaded: LoadedChain | undefined;
  private lastSeen = '';
  private timer: NodeJS.Timeout | undefined;
  private reloading: Promise<void> | undefined;

  constructor(
    private readonly settings: PluginHostSettings,
    private readonly deps: PluginHostDeps,
  ) {
    this.pool = new WorkerPool(settings.workers === 0 ? defaultWorkers() : settings.workers);
  }

  /** Loads the chain; throws the first problem (startup refuses to run with it). */
  async load(): Promise<void> {
    const seen = await this.fingerprint();
    this.install(await loadChain(this.settings, this.cache));
    this.lastSeen = seen;
  }

  /** Starts the workers and the reload loop. */
  start(): void {
    this.pool.start();
    if (this.settings.reload_interval > 0 && this.timer === undefined) {
      this.timer = setInterval(() => void this.reload(), this.settings.reload_interval);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.reloading;
    await this.pool.stop();
  }

  /** The loaded chain: index hash and plug-ins. */
  get chain(): LoadedChain | undefined {
    return this.loaded;
  }

  /**
   * Loads the chain again when the index or its pin file changed. A chain that fails
   * verification is refused as a whole and the previous one keeps running.
   */
  reload(): Promise<void> {
    this.reloading ??= (async () => {
      try {
        const seen = await this.fingerprint();
        if (seen === this.lastSeen) return;
        this.lastSeen = seen;
        const chain = await loadChain(this.settings, this.cache);
        this.install(chain);
        this.deps.onReload?.({
          ok: true,
          indexSha256: chain.indexSha256,
          plugins: chain.plugins.map((p) => ({
            name: p.name,
            version: p.version,
            sha256: p.moduleSha256,
          })),
        });
      } catch (err) {
        this.deps.onReload?.({ ok: false, error: err });
      } finally {
        this.reloading = undefined;
      }
    })();
    return this.reloading;
  }

  /** What a change looks like: the index bytes and the pin, read as they are now. */
  private async fingerprint(): Promise<string> {
    const read = (file: string) => readFile(resolve(file)).catch(() => Buffer.alloc(0));
    const pin =
      this.settings.index_sha256_file === undefined
        ? (this.settings.index_sha256 ?? '')
        : await read(this.settings.index_sha256_file);
    return sha256(await read(this.settings.index), pin).toString('hex');
  }

  private install(chain: LoadedChain): void {
    const entries = new Map<string, Entry>();
    for (const plugin of chain.plugins) {
      for (const decl of plugin.evaluators) {
        const other = entries.get(decl.name);
        if (other !== undefined || this.deps.registry.isBuiltin(decl.name)) {
          const holder =
            other === undefined ? 'a built-in evaluator' : `plug-in ${other.plugin.name}`;
          throw PluginErrors.PLUGIN_EVALUATOR_CONFLICT(
            `plug-in ${plugin.name} declares evaluator "${decl.name}", already the name of ${holder}`,
          );
        }
        entries.set(decl.name, { plugin, decl, validate: this.compileParams(plugin, decl) });
      }
    }
    for (const plugin of chain.plugins) this.pool.load(plugin.moduleKey, plugin.module);
    this.deps.registry.setPlugins([...entries.values()].map((e) => this.factory(e)));
    this.entries = entries;
    this.loaded = chain;
  }

  private compileParams(plugin: LoadedPlugin, decl: PluginEvaluatorDecl): ValidateFunction {
    try {
      return compileJsonSchema(decl.paramsSchema);
    } catch (err) {
      const why = err instanceof Error ? err.message : 'invalid';
      throw PluginErrors.PLUGIN_MANIFEST_INVALID(
        `${plugin.manifestFile}: the paramsSchema of evaluator "${decl.name}": ${why}`,
      );
    }
  }

  private factory(entry: Entry): EvaluatorFactory {
    const { plugin, decl, validate } = entry;
    const params = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
      const problem = paramsIssues(validate, value);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    });
    return defineEvaluator({
      manifest: {
        type: decl.name,
        description: decl.description,
        needs: decl.needs,
        scores: decl.scores,
        params,
        cheap: true,
        plugin: {
          name: plugin.name,
          version: plugin.version,
          sha256: plugin.moduleSha256,
          manifestSha256: plugin.manifestSha256,
          paramsSchema: decl.paramsSchema,
        },
      },
      bind: (bound) => ({
        evaluate: (record) => this.evaluate(decl.name, entry, bound, record),
      }),
    });
  }

  /** Runs the evaluator as currently loaded (`bound` is the entry its params were checked on). */
  private async evaluate(
    name: string,
    bound: Entry,
    params: Record<string, unknown>,
    record: EvalRecord,
  ): Promise<EvalOutput> {
    const entry = this.entries.get(name);
    if (entry === undefined) {
      throw PluginErrors.PLUGIN_FAILED(
        `plug-in evaluator "${name}" is no longer in the plug-in index`,
      );
    }
    if (entry !== bound) {
      const problem = paramsIssues(entry.validate, params);
      if (problem !== undefined) {
        throw PluginErrors.PLUGIN_FAILED(
          `plug-in evaluator "${name}" was reloaded and its params no longer fit: ${problem}`,
        );
      }
    }
    const { plugin, decl } = entry;
    const recordJson = JSON.stringify(record);
    const stdin = new TextEncoder().encode(
      `{"abi":"${REQUEST_ABI}","evaluator":${JSON.stringify({ name, params })},"record":${recordJson}}`,
    );
    if (stdin.length > plugin.limits.maxInputBytes) {
      throw PluginErrors.PLUGIN_FAILED(
        `the request to plug-in evaluator "${name}" is ${stdin.length} bytes, over the cap of ${plugin.limits.maxInputBytes}`,
      );
    }
    const randomKey = sha256(RANDOM_LABEL, plugin.moduleSha256, name, sha256(recordJson));
    const ending = await this.pool.run(
      plugin.moduleKey,
      {
        args: [name],
        stdin,
        randomKey,
        maxStdout: plugin.limits.maxOutputBytes,
      },
      plugin.limits.timeoutMs,
    );
    return interpret(ending, decl, plugin.limits);
  }
}
