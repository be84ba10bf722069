import { createHash } from 'node:crypto';
import { IdempotencyErrors } from './error-codes.js';
import { KEYED_STREAM_LIMITS, type StreamLimits } from './limits.js';
import { requestDigest } from './request.js';

export interface KeyedStream<T> {
  messages: T[];
  /** The request digest to pass to `execute` (the method and every message's bytes). */
  digest: string;
  bytes: number;
}

/**
 * Reads a keyed write stream (an RPC client stream carrying an Idempotency-Key) to its end,
 * enforcing 64 MiB and 100001 messages, and digests it. The operation runs, and its response is
 * produced, only once this resolves: the sender must close its side of the stream before it can
 * read a response, so a replay always answers a complete request.
 *
 * `encode` gives a message's wire bytes (for protobuf messages, `toBinary(schema, m)`); each is
 * digested with its length, so two streams that split the same bytes differently differ.
 * `method` names the RPC (`touchstone.v1alpha1.DatasetService/UploadDataset`).
 */
export async function readKeyedStream<T>(
  source: AsyncIterable<T>,
  encode: (message: T) => Uint8Array,
  method: string,
  limits: StreamLimits = KEYED_STREAM_LIMITS,
): Promise<KeyedStream<T>> {
  const hash = createHash('sha256');
  const messages: T[] = [];
  let bytes = 0;
  const length = Buffer.alloc(8);
  for await (const message of source) {
    if (messages.length + 1 > limits.maxMessages) {
      throw IdempotencyErrors.IDEMPOTENCY_STREAM_TOO_LARGE(
        `a keyed write stream may carry at most ${limits.maxMessages} messages`,
      );
    }
    const encoded = encode(message);
    bytes += encoded.byteLength;
    if (bytes > limits.maxBytes) {
      throw IdempotencyErrors.IDEMPOTENCY_STREAM_TOO_LARGE(
        `a keyed write stream may carry at most ${limits.maxBytes} bytes`,
      );
    }
    length.writeBigUInt64BE(BigInt(encoded.byteLength));
    hash.update(length);
    hash.update(encoded);
    messages.push(message);
  }
  const digest = requestDigest({
    method: 'RPC',
    path: method,
    query: '',
    bodySha256: hash.digest('hex'),
  });
  return { messages, digest, bytes };
}

/** The digest of a unary keyed RPC: the method and the request message's bytes. */
export function unaryDigest(method: string, message: Uint8Array): string {
  return requestDigest({
    method: 'RPC',
    path: method,
    query: '',
    bodySha256: createHash('sha256').update(message).digest('hex'),
  });
}
