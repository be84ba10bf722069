import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../../test/support/random.js';
import { handoffOfName } from './precedence.js';

/** The regular expressions handoffOfName replaces: the reference it must agree with. */
const REGEXES = [/^handoff to (.+)$/i, /^(.+?) → (.+)\.handoff$/, /^Handoff: (.+?) → (.+)$/];
function regexHandoff(name: string): { from?: string; to?: string } | undefined {
  for (const re of REGEXES) {
    const m = re.exec(name);
    if (m) return m.length === 2 ? { to: m[1] } : { from: m[1], to: m[2] };
  }
  return undefined;
}

describe('handoff span names', () => {
  it.each([
    ['handoff to billing', { to: 'billing' }],
    ['Handoff To Billing', { to: 'Billing' }],
    ['triage → billing.handoff', { from: 'triage', to: 'billing' }],
    ['Handoff: triage → billing', { from: 'triage', to: 'billing' }],
    ['Handoff: a → .handoff', { from: 'a', to: '.handoff' }],
    ['a → b → c.handoff', { from: 'a', to: 'b → c' }],
    [' → b.handoff', undefined],
    ['a → .handoff', undefined],
    ['a → b\n.handoff', undefined],
    ['chat gpt-4o', undefined],
  ])('%j → %j', (name, expected) => {
    expect(handoffOfName(name)).toEqual(expected);
  });

  it('agrees with the regular expressions it replaces on 50 000 random names', () => {
    const parts = [
      'a',
      'B',
      ' ',
      ' → ',
      '→',
      '.handoff',
      'handoff',
      'Handoff: ',
      'handoff to ',
      '\n',
      '\u2028',
      '.',
    ];
    const rnd = seededRandom(11);
    for (let n = 0; n < 50_000; n++) {
      let name = '';
      const count = Math.floor(rnd() * 7);
      for (let i = 0; i < count; i++) name += parts[Math.floor(rnd() * parts.length)];
      expect(handoffOfName(name), JSON.stringify(name)).toEqual(regexHandoff(name));
    }
  });

  it('reads 64 KiB of arrows in linear time', () => {
    const started = performance.now();
    expect(handoffOfName(`${'a → '.repeat(16_000)}x`)).toBeUndefined();
    expect(handoffOfName(`Handoff: ${'a → '.repeat(16_000)}\n`)).toBeUndefined();
    expect(handoffOfName(`${'a → '.repeat(16_000)}.handoff`)?.from).toBe('a');
    expect(performance.now() - started).toBeLessThan(500);
  });
});
