import { describe, expect, it } from 'vitest';
import { onDemand } from './on-demand.js';

describe('onDemand', () => {
  it('loads at the first call, once, and shares the promise', async () => {
    let loads = 0;
    const load = onDemand(async () => ++loads);
    expect(loads).toBe(0);
    const [a, b] = await Promise.all([load(), load()]);
    expect([a, b, await load(), loads]).toEqual([1, 1, 1, 1]);
  });
});
