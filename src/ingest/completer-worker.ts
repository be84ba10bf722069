/**
 * Worker-thread entry of trace completion (see completer-thread.ts): opens its own store
 * connection and runs the TraceCompleter loop there, so normalizing, digesting and completing
 * traces do not take CPU from the thread that answers OTLP requests.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThisThreadsPriority, systemClock } from '../core/index.js';
import { openStore } from '../store/index.js';
import type { CompleterWorkerData, FromCompleterWorker } from './completer-thread.js';
import { normalizeStoredTrace } from './normalize-stored.js';
import { TraceCompleter } from './pipeline.js';

const data = workerData as CompleterWorkerData;

// Measured with the Python SDK pushing one-span traces on two cores: 22.6–24.9k → 26.4–27.4k
// records/s acknowledged at nice 10; the traces complete afterwards, in the same CPU time
// (docs/performance.md).
lowerThisThreadsPriority();
const port = parentPort;
if (port === null) throw new Error('completer-worker must run in a worker thread');
const post = (msg: FromCompleterWorker) => port.postMessage(msg);

const store = await openStore(data.store, { clock: systemClock, dataDir: data.dataDir });
const completer = new TraceCompleter({
  store,
  clock: systemClock,
  rules: data.rules,
  maxEventsPerSpan: data.maxEventsPerSpan,
  normalize: normalizeStoredTrace,
  observer: {
    onCompleted: (traces) => {
      if (traces > 0) post({ type: 'completed', traces });
    },
    onReceived: () => undefined,
    onRejected: () => undefined,
    onStored: () => undefined,
  },
  // The online engine's hook will run here, in the worker, next to the normalized trace; its
  // follow-up (work items) belongs in the completion transaction.
  logger: {
    warn: (obj, msg) => {
      const err = (obj as { err?: unknown }).err;
      post({
        type: 'warn',
        msg,
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    },
  },
  ...(data.intervalMs === undefined ? {} : { intervalMs: data.intervalMs }),
});
port.on('message', (msg: { type: 'stop' }) => {
  if (msg.type !== 'stop') return;
  void (async () => {
    await completer.shutdown();
    await store.close();
    port.close();
  })();
});
completer.start();
post({ type: 'ready' });
