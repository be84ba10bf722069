import { describe, expect, it } from 'vitest';
import { evaluate, facts, root, summary } from './facts.testkit.js';
import { traceFacts } from './index.js';

describe('traceFacts', () => {
  it('reads the summary, the trajectory and the root span', () => {
    expect(facts).toEqual({
      service: 'agent-booking',
      name: 'chat flights',
      duration: 3,
      error: true,
      steps: 7,
      tools: ['search', 'calculator', 'search'],
      models: ['gpt-4o', 'gpt-4o-mini'],
      attributes: root.attributes,
      resource: root.resource,
      labels: { env: 'prod', team: 'travel' },
      project: 'default',
      source: '',
    });
  });

  it('leaves attributes and resource empty without a root', () => {
    const bare = traceFacts(summary, { id: 'r' });
    expect(bare.attributes).toEqual({});
    expect(bare.resource).toEqual({});
    expect(bare.tools).toEqual([]);
    expect(evaluate('size(attributes) == 0 && size(tools) == 0', bare)).toEqual({
      ok: true,
      value: true,
    });
  });
});
