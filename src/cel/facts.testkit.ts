/**
 * A trace's facts for the CEL tests (a root span with nested, big and hostile attribute values,
 * one holding a secret-looking marker), and helpers that compile or evaluate against them.
 */
import { expect } from 'vitest';
import { type EvalRecord, isTouchstoneError, type TouchstoneError } from '../core/index.js';
import { type CelKind, compileExpression, type TraceFacts, traceFacts } from './index.js';

export const SECRET = '(sk-live-SECRET-1234';

export const record: EvalRecord = {
  id: 'rec-1',
  input: 'find flights',
  output: 'done',
  trajectory: [
    { type: 'agent', name: 'planner', error: '' },
    { type: 'llm', name: 'chat gpt-4o', model: 'gpt-4o', error: '' },
    { type: 'tool', name: 'search', input: '{"q":"x"}', error: '' },
    { type: 'llm', name: 'chat gpt-4o', model: 'gpt-4o', error: '' },
    { type: 'tool', name: 'calculator', error: '' },
    { type: 'tool', name: 'search', error: 'timeout' },
    { type: 'llm', name: 'chat mini', model: 'gpt-4o-mini', error: '' },
  ],
};

export const summary = {
  service: 'agent-booking',
  name: 'chat flights',
  durationMs: 3000,
  error: true,
  steps: 7,
  labels: { env: 'prod', team: 'travel' },
  project: 'default',
  source: '',
};

export const root = {
  attributes: {
    'gen_ai.request.model': 'gpt-4o',
    'gen_ai.usage.input_tokens': 1200,
    'http.status_code': 200,
    temperature: 0.5,
    big: 9007199254740993n as unknown as number,
    tags: ['beta', 'eu'],
    meta: { tier: 'gold', retries: 2, nested: { deep: true } },
    secret: SECRET,
    trap: `found no matching overload for '${SECRET}' applied to '(int)'`,
  },
  resource: { 'service.name': 'agent-booking', 'deployment.environment': 'prod' },
};

export const facts = traceFacts(summary, record, root);

export function compileError(source: string, kind: CelKind = 'selector'): TouchstoneError {
  try {
    compileExpression(source, kind, 'spec.selector');
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(source)} not to compile`);
}

export function messages(source: string, kind: CelKind = 'selector'): string[] {
  const err = compileError(source, kind);
  expect(err.code).toBe('POLICY_CEL_INVALID');
  for (const d of err.details) expect(d.path).toBe('spec.selector');
  return err.details.map((d) => d.message);
}

/** Compiled as a stored expression: these tests are about evaluation, not the apply-time estimate. */
export function evaluate(source: string, f: TraceFacts = facts, scores?: Record<string, number>) {
  const kind: CelKind = scores === undefined ? 'selector' : 'when';
  return compileExpression(source, kind, 'spec.selector', { stored: true }).evaluate(f, scores);
}
