import type { EvaluatorFactory } from './contract.js';

/**
 * Evaluator types by name: the static lists of built-in and judge evaluators, plus the plug-in
 * evaluators loaded from the plug-in index, which a reload replaces as a whole.
 */
export class EvaluatorRegistry {
  private readonly byType = new Map<string, EvaluatorFactory>();
  private plugins = new Map<string, EvaluatorFactory>();

  constructor(factories: readonly EvaluatorFactory[]) {
    for (const f of factories) {
      if (this.byType.has(f.manifest.type)) {
        throw new Error(`evaluator type ${f.manifest.type} registered twice`);
      }
      this.byType.set(f.manifest.type, f);
    }
  }

  /** Whether `type` is a built-in or judge evaluator (a plug-in may not take its name). */
  isBuiltin(type: string): boolean {
    return this.byType.has(type);
  }

  /** Replaces the plug-in evaluator types; the plug-in loader has refused name clashes already. */
  setPlugins(factories: readonly EvaluatorFactory[]): void {
    const next = new Map<string, EvaluatorFactory>();
    for (const f of factories) {
      if (this.byType.has(f.manifest.type) || next.has(f.manifest.type)) {
        throw new Error(`evaluator type ${f.manifest.type} registered twice`);
      }
      next.set(f.manifest.type, f);
    }
    this.plugins = next;
  }

  get(type: string): EvaluatorFactory | undefined {
    return this.byType.get(type) ?? this.plugins.get(type);
  }

  list(): EvaluatorFactory[] {
    return [...this.byType.values(), ...this.plugins.values()].sort((a, b) =>
      a.manifest.type.localeCompare(b.manifest.type),
    );
  }
}
