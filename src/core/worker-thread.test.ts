import { setFlagsFromString } from 'node:v8';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../../test/support/process.js';
import { LoopWorker } from './worker-thread.js';

const idle = { start: () => undefined, shutdown: async () => undefined };

describe('LoopWorker', () => {
  afterEach(() => {
    setFlagsFromString('--max-semi-space-size=0');
  });

  it("keeps the worker's young generation to its resourceLimits under the server's semi-space flag", async () => {
    // What `serve` runs with (src/main.ts): 16 MB semi-spaces, a new space of ~34 MB once grown.
    setFlagsFromString('--max-semi-space-size=16');
    const reports: number[] = [];
    const worker = new LoopWorker<{ type: 'stop' }, { type: 'heap'; newSpaceBytes: number }>({
      entry: new URL('./worker-thread.testkit.js', import.meta.url),
      workerData: undefined,
      resourceLimits: { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 12 },
      fallback: idle,
      onMessage: (msg) => reports.push(msg.newSpaceBytes),
      work: 'test',
      doing: 'testing',
    });
    worker.start();
    try {
      const newSpace = await eventually(async () => reports[0]);
      // A young generation of 12 MB is semi-spaces of 4 MB: a new space of ~8 MB, not ~34.
      expect(newSpace).toBeGreaterThan(0);
      expect(newSpace).toBeLessThanOrEqual(12 * 2 ** 20);
    } finally {
      await worker.shutdown();
    }
  });
});
