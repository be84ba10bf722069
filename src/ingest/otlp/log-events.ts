/**
 * What both OTLP logs decoders do with a decoded log record (docs/ingest.md, "POST /v1/logs"):
 * a GenAI event (an event name starting `gen_ai.`, e.g. `gen_ai.user.message`, `gen_ai.choice`,
 * `gen_ai.client.inference.operation.details`) becomes the span event it describes, for the span
 * its ids name; a GenAI event without valid ids is refused (it could join no span); any other
 * record is accepted and not kept.
 */
import type { Attributes, AttributeValue, SpanEvent } from '../../core/index.js';
import type { DecodedLogs, LogEvent } from '../types.js';
import { setAttribute } from './attributes.js';

/** Fixed sentences (they go into the partial-success message): never log content. */
export const LOG_REJECT = {
  traceIdInvalid: 'GenAI event log record without a trace id of 16 non-zero bytes',
  spanIdInvalid: 'GenAI event log record without a span id of 8 non-zero bytes',
} as const;

/** One log record as decoded; ids are lowercase hex, or undefined when absent or invalid. */
export interface DecodedLogRecord {
  traceId: string | undefined;
  spanId: string | undefined;
  eventName: string;
  /** Unix nanoseconds as decimal strings, '0' when absent. */
  time: string;
  observedTime: string;
  attributes: Attributes;
  /** Attributes the sender dropped plus those past `traces.limits.max_attributes_per_event`. */
  droppedAttributes: number;
  body: AttributeValue | undefined;
}

function isMap(v: AttributeValue | undefined): v is { [key: string]: AttributeValue } {
  return typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/**
 * The span event of a GenAI log record: its attributes, with the body's fields beside them (the
 * shape the same events have when sent as span events); a body that is not a map stays whole
 * under `body`. Its time is the record's, else the time it was observed (the Python SDK sets
 * only that one).
 */
function spanEventOf(record: DecodedLogRecord, name: string): SpanEvent {
  const attributes = record.attributes;
  const body = record.body;
  if (isMap(body)) for (const key of Object.keys(body)) setAttribute(attributes, key, body[key]!);
  else if (body !== undefined) setAttribute(attributes, 'body', body);
  const event: SpanEvent = {
    name,
    timeUnixNano: record.time !== '0' ? record.time : record.observedTime,
    attributes,
  };
  if (record.droppedAttributes > 0) event.droppedAttributesCount = record.droppedAttributes;
  return event;
}

/** Sorts the records of one logs request into kept GenAI events, refusals and ignored records. */
export class LogRecordSorter {
  private readonly events: LogEvent[] = [];
  private rejected = 0;
  private readonly reasons: string[] = [];
  private ignored = 0;

  add(record: DecodedLogRecord): void {
    // Older SDKs put the event name in an attribute; the LogRecord field came later.
    const named = record.attributes['event.name'];
    const name = record.eventName || (typeof named === 'string' ? named : '');
    if (!name.startsWith('gen_ai.')) {
      this.ignored++;
      return;
    }
    if (record.traceId === undefined || record.spanId === undefined) {
      const reason =
        record.traceId === undefined ? LOG_REJECT.traceIdInvalid : LOG_REJECT.spanIdInvalid;
      this.rejected++;
      if (!this.reasons.includes(reason)) this.reasons.push(reason);
      return;
    }
    this.events.push({
      traceId: record.traceId,
      spanId: record.spanId,
      event: spanEventOf(record, name),
    });
  }

  result(): DecodedLogs {
    return {
      events: this.events,
      rejected: this.rejected,
      rejectReasons: this.reasons,
      ignored: this.ignored,
    };
  }
}
