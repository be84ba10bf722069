import { describe, expect, it } from 'vitest';
import { BackgroundLoop } from './background.js';

describe('BackgroundLoop', () => {
  it('runs nothing before start, one pass at a time, one more when woken during a pass', async () => {
    let passes = 0;
    let release: () => void = () => {};
    const loop = new BackgroundLoop(
      async () => {
        passes++;
        await new Promise<void>((r) => {
          release = r;
        });
      },
      60_000,
      () => {},
    );
    loop.wake();
    expect(passes).toBe(0);
    loop.start();
    expect(passes).toBe(1);
    loop.wake();
    loop.wake();
    expect(passes).toBe(1);
    release();
    await new Promise((r) => setTimeout(r, 10));
    expect(passes).toBe(2);
    const stopping = loop.stop();
    release();
    await stopping;
    loop.wake();
    expect(passes).toBe(2);
    expect(loop.stopped).toBe(true);
    await loop.stop();
  });

  it('reports a failed pass and keeps going', async () => {
    const errors: unknown[] = [];
    const loop = new BackgroundLoop(
      async () => {
        throw new Error('boom');
      },
      60_000,
      (err) => errors.push(err),
    );
    loop.start();
    await new Promise((r) => setTimeout(r, 10));
    expect(errors).toHaveLength(1);
    await loop.stop();
  });
});
