/**
 * Worker-thread entry of ingest's preparation (see prepare-thread.ts): decodes an OTLP trace
 * request, holds it to the limits, redacts it, normalizes its whole traces and encodes the rows,
 * so that the thread holding the store's connection only runs the statements. It stores nothing.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { compileRedaction } from '../redaction/index.js';
import { normalizeStoredTrace } from './normalize-stored.js';
import type { PrepareDeps } from './pipeline.js';
import {
  type FromPrepareWorker,
  type PrepareWorkerData,
  prepareOtlp,
  sendableError,
  type ToPrepareWorker,
} from './prepare-thread.js';

const data = workerData as PrepareWorkerData;
const port = parentPort;
if (port === null) throw new Error('prepare-worker must run in a worker thread');
const post = (msg: FromPrepareWorker) => port.postMessage(msg);

const deps: PrepareDeps = {
  redactor: compileRedaction(data.redaction),
  limits: data.limits,
  ...(data.completeOnArrival ? { normalize: normalizeStoredTrace } : {}),
};

port.on('message', ({ id, request }: ToPrepareWorker) => {
  prepareOtlp(deps, request, undefined).then(
    (prepared) => post({ type: 'prepared', id, prepared }),
    (err: unknown) => post({ type: 'failed', id, error: sendableError(err) }),
  );
});
post({ type: 'ready' });
