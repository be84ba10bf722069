/** Worker entry for worker-thread.test.ts: allocates, reports its new space, stops on `stop`. */
import { getHeapSpaceStatistics } from 'node:v8';
import { parentPort } from 'node:worker_threads';

const port = parentPort;
if (port === null) throw new Error('worker-thread.testkit must run in a worker thread');
// Enough short-lived garbage, some of it kept, for the new space to grow to its limit.
const kept: unknown[] = [];
for (let i = 0; i < 2_000_000; i++) {
  const o = { i, pair: [i, i + 1], text: `x${i}` };
  if (i % 1000 === 0) kept.push(o);
}
const newSpace = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
port.postMessage({ type: 'heap', newSpaceBytes: newSpace?.space_size ?? 0, kept: kept.length });
port.postMessage({ type: 'ready' });
port.on('message', (msg: { type: string }) => {
  if (msg.type === 'stop') port.close();
});
