import type { EvaluatorFactory } from './contract.js';

/** Evaluator types by name. Built from the static lists of built-in and judge evaluators. */
export class EvaluatorRegistry {
  private readonly byType = new Map<string, EvaluatorFactory>();

  constructor(factories: readonly EvaluatorFactory[]) {
    for (const f of factories) {
      if (this.byType.has(f.manifest.type)) {
        throw new Error(`evaluator type ${f.manifest.type} registered twice`);
      }
      this.byType.set(f.manifest.type, f);
    }
  }

  get(type: string): EvaluatorFactory | undefined {
    return this.byType.get(type);
  }

  list(): EvaluatorFactory[] {
    return [...this.byType.values()].sort((a, b) => a.manifest.type.localeCompare(b.manifest.type));
  }
}
