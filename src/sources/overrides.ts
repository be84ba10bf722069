import {
  type CompiledExpression,
  compileExpression,
  type FailureReason,
  traceFacts,
} from '../cel/index.js';
import { contentText, type NormalizedTrace } from '../core/index.js';
import type { ParsedSource } from './resource.js';

/**
 * A source's `spec.overrides`: CEL expressions that set record fields of its pulled traces. They
 * see what selectors see plus the record's input and output as text. An expression that fails
 * leaves its field as it was (so evaluators needing it skip the record) and is reported to
 * `onError` with its field and why (`cost`: it ran out of its budget).
 */
export function compileOverrides(
  source: ParsedSource,
  project: string,
  onError?: (field: string, reason: FailureReason) => void,
): ((n: NormalizedTrace) => NormalizedTrace) | undefined {
  const entries = Object.entries(source.spec.overrides);
  if (entries.length === 0) return undefined;
  const compiled: [string, CompiledExpression][] = entries.map(([target, expr]) => [
    target,
    compileExpression(expr, 'override', `spec.overrides.${target}`),
  ]);
  return (n) => {
    const facts = traceFacts({ ...n.summary, project, source: source.name }, n.record, n.root);
    const text = { input: contentText(n.record.input), output: contentText(n.record.output) };
    const record = { ...n.record, metadata: { ...(n.record.metadata ?? {}) } };
    let labels = n.summary.labels;
    for (const [target, expression] of compiled) {
      const r = expression.evaluateValue(facts, text);
      if (!r.ok) {
        onError?.(target, r.reason);
        continue;
      }
      if (target.startsWith('metadata.'))
        record.metadata[target.slice('metadata.'.length)] = r.value;
      else if (target.startsWith('labels.')) {
        labels = {
          ...labels,
          [target.slice('labels.'.length)]:
            typeof r.value === 'string' ? r.value : JSON.stringify(r.value),
        };
      } else if (target === 'context') {
        record.context = Array.isArray(r.value) ? r.value : [r.value];
      } else (record as Record<string, unknown>)[target] = r.value;
    }
    return { ...n, record: { ...record, labels }, summary: { ...n.summary, labels } };
  };
}
