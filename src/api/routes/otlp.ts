import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import {
  type IngestService,
  type PrepareThreads,
  receiveOtlpTraces,
  type WriteTurn,
} from '../../ingest/index.js';
import type { Turnstile, WriteAdmission } from '../admission.js';
import { one, type Query } from '../context.js';
import { decodedPayload, heldForTurn, otlpBodyParsers } from '../otlp-body.js';
import {
  exportResponse,
  OTLP_CONTENT_TYPE,
  type OtlpEncoding,
  otlpEncodingOf,
  partialSuccessMessage,
} from '../otlp-wire.js';

export interface OtlpRouteDeps {
  ingest: IngestService;
  /** Threads preparing trace requests before their turn; undefined: prepared in the turn. */
  threads: PrepareThreads | undefined;
  bodyLimit: number;
  maxAttributeBytes: number;
  /** Counts the bytes of inflated bodies against the write budget. */
  admission: WriteAdmission;
  /** Turns to decode and store, shared by `/v1/traces` and `/v1/logs`. */
  turns: Turnstile;
}

/** A request to an OTLP receiver, read: its project, encoding and body, and the decoders' options. */
export interface OtlpRequest {
  project: string;
  labels: Record<string, string>;
  encoding: OtlpEncoding;
  /** Bytes for protobuf, text for JSON. */
  body: Buffer | string;
  options: { maxAttributeBytes: number; limits: IngestService['limits'] };
}

/**
 * `POST <path>` as every OTLP/HTTP receiver serves it: admitted as a write (admission.ts) before
 * its body is read, authorized for `traces.write`, decoded and stored by `receive` (which stores
 * in `turn`), then answered in the request's encoding only once stored.
 */
export function postOtlp(
  app: FastifyInstance,
  path: string,
  deps: OtlpRouteDeps,
  signal: 'traces' | 'logs',
  receive: (
    request: OtlpRequest,
    turn: WriteTurn,
  ) => Promise<{ rejected: number; message: string }>,
): void {
  app.post(
    path,
    {
      config: { otlp: true },
      onRequest: async () => deps.turns.refuseIfBacklogged(),
      preParsing: async (request, _reply, payload) =>
        decodedPayload(request, payload, deps.bodyLimit, deps.admission),
    },
    async (request, reply) => {
      // `?project=` lets a caller without a key project (no auth on loopback) pick one; a key
      // naming another project than its own is refused by authorize.
      const asked = one(request.query as Query, 'project');
      const project = authorize(request.principal, 'traces.write', asked || undefined);
      const encoding = otlpEncodingOf(request.headers['content-type']);
      const raw = request.body as Buffer | string;
      const body = encoding === 'protobuf' || typeof raw === 'string' ? raw : raw.toString('utf8');
      const { rejected, message } = await heldForTurn(request, reply, deps.turns, (turn) =>
        receive(
          {
            project,
            labels: { ...request.principal.labels },
            encoding,
            body,
            options: { maxAttributeBytes: deps.maxAttributeBytes, limits: deps.ingest.limits },
          },
          turn,
        ),
      );
      return reply
        .type(OTLP_CONTENT_TYPE[encoding])
        .send(exportResponse(encoding, rejected, message, signal));
    },
  );
}

/**
 * OTLP/HTTP trace receiver (`POST /v1/traces`): protobuf or JSON, gzip/deflate, answered per the
 * OTLP/HTTP spec only after the spans are durably stored.
 */
export async function otlpRoutes(app: FastifyInstance, deps: OtlpRouteDeps): Promise<void> {
  otlpBodyParsers(app, deps.bodyLimit);
  postOtlp(
    app,
    '/v1/traces',
    deps,
    'traces',
    async ({ project, labels, encoding, body, options }, turn) => {
      // In a worker thread when one runs, else in slices in the turn: a body of megabytes must
      // not hold health checks and other requests while it is read (but for JSON.parse, which
      // cannot be cut).
      const target = { project, labels, source: '' };
      const request = { target, encoding, body, options };
      const result = await receiveOtlpTraces(deps.ingest, deps.threads, request, turn);
      return {
        rejected: result.rejected,
        message: partialSuccessMessage(result.rejected, result.rejectReasons, result.rejectedSpans),
      };
    },
  );
}
