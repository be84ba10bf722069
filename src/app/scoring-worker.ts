/**
 * Worker-thread entry of online scoring (see scoring-thread.ts): opens its own store connection
 * and builds what the engine needs from the server config — the evaluators and judges, plug-ins,
 * the webhook outbox and the trace sources' result sinks — so selecting, evaluating and storing
 * results do not take CPU from the thread that answers requests. With `completion` in its data it
 * also runs the trace completion loop (then no completion worker runs). Its metrics are forwarded
 * to the main thread in batches; deliveries it writes wake the main thread's webhook dispatcher.
 */
import { writeFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { destination, pino } from 'pino';
import {
  type Component,
  lowerThisThreadsPriority,
  startAll,
  stopAll,
  systemClock,
} from '../core/index.js';
import { normalizeStoredTrace, TraceCompleter } from '../ingest/index.js';
import { resultSinks, SourceDirectory } from '../sources/index.js';
import { openStore } from '../store/index.js';
import { WebhookOutbox } from '../webhooks/index.js';
import {
  buildPlugins,
  createEvaluationService,
  createJudgeHttpClient,
} from './build-evaluation.js';
import { buildPolicyEngine } from './build-policies.js';
import { closes } from './lifecycle.js';
import {
  ForwardingObserver,
  type FromScoringWorker,
  type ScoringWorkerData,
  type ToScoringWorker,
} from './scoring-thread.js';

/** This thread's name in `top -H`, ps and /proc (Linux; the benches read its CPU time by it). */
const SCORING_THREAD_NAME = 'ts-scoring';
try {
  writeFileSync('/proc/thread-self/comm', SCORING_THREAD_NAME);
} catch {
  // Not Linux, or not permitted: the thread keeps its inherited name.
}
// At the process's priority this thread slowed the request thread by a fifth in multi-span
// ingest; at nice 10 it scored as soon (docs/performance.md, "The scoring worker's priority").
lowerThisThreadsPriority();

const data = workerData as ScoringWorkerData;
const port = parentPort;
if (port === null) throw new Error('scoring-worker must run in a worker thread');
const post = (msg: FromScoringWorker) => port.postMessage(msg);

const { config, env } = data;
const clock = systemClock;
const logger = pino(
  { level: config.log_level, base: { service: 'touchstone', thread: 'scoring' } },
  destination(2),
);
const store = await openStore(config, { clock, logger });
const observer = new ForwardingObserver((calls) => post({ type: 'metrics', calls }), data.flushMs);
const http = createJudgeHttpClient(config);
const parts: Component[] = [closes('store', store), closes('judge-http', http)];
let evaluation: ReturnType<typeof createEvaluationService>;
try {
  evaluation = createEvaluationService(config, { http, env, clock, logger, observer });
  parts.push(...(await buildPlugins(config, { registry: evaluation.registry, logger })));
} catch (err) {
  await stopAll(parts);
  throw err;
}
// Started in list order (a failure stops what started); stopped in reverse, the store last.
await startAll(parts);
// Deliveries are written in the results transaction; one message per turn wakes the dispatcher.
let enqueued = false;
const events = new WebhookOutbox({
  clock,
  onEnqueued: () => {
    if (enqueued) return;
    enqueued = true;
    setImmediate(() => {
      enqueued = false;
      post({ type: 'webhooks-enqueued' });
    });
  },
});
const directory = new SourceDirectory({ store, clock });
const sinks = resultSinks(directory, clock);
const scoring = buildPolicyEngine(config, {
  store,
  clock,
  logger,
  observer,
  evaluation,
  events,
  sinks,
});

// Completion here too (ScoringWorkerData.completion): the traces it completes wake this engine.
const { completion } = data;
const completer =
  completion === undefined
    ? undefined
    : new TraceCompleter({
        store,
        clock,
        rules: completion.rules,
        maxEventsPerSpan: completion.maxEventsPerSpan,
        normalize: normalizeStoredTrace,
        observer: {
          onCompleted: (traces) => {
            if (traces === 0) return;
            post({ type: 'completed', traces });
            scoring.wake();
          },
          onReceived: () => undefined,
          onRejected: () => undefined,
          onStored: () => undefined,
        },
        logger,
        ...(completion.intervalMs === undefined ? {} : { intervalMs: completion.intervalMs }),
      });

let stopping = false;
port.on('message', (msg: ToScoringWorker) => {
  if (msg.type === 'wake') scoring.wake();
  else if (msg.type === 'invalidate') {
    scoring.invalidate();
    // A policy's `trace_feedback` sinks are read through the directory.
    directory.invalidate();
  } else if (msg.type === 'stop' && !stopping) {
    stopping = true;
    void (async () => {
      try {
        // What completion still finishes is scored before the engine stops.
        await completer?.shutdown();
        await scoring.shutdown();
      } finally {
        observer.flush();
        await stopAll(parts);
        port.close();
      }
    })();
  }
});
scoring.start();
completer?.start();
post({ type: 'ready' });
