/**
 * OTLP/JSON `ExportLogsServiceRequest`, with the trace decoder's OTLP/JSON rules (hex or base64
 * ids, int64 as strings or numbers, lowerCamelCase or snake_case keys, `null` as absent, unknown
 * fields ignored) and its AnyValue decoding, nesting cap and attribute size cap. Resources and
 * scopes are skipped: a log record's events join a span, which brings its own.
 */
import type { DecodedLogs, DecodeOptions } from '../types.js';
import { countLimitsOf } from './attributes.js';
import {
  arrayOrAbsent,
  isObject,
  isZeroHex,
  JsonDecoder,
  jsonId,
  nullToAbsent,
  objectOrAbsent,
  parseOtlpJson,
  ShapeError,
  stringOrAbsent,
  time,
  uint32,
  walkOtlpJson,
  within,
} from './json.js';
import { type DecodedLogRecord, LogRecordSorter } from './log-events.js';
import { normaliseLimit } from './truncate.js';

/**
 * Decodes an OTLP/JSON logs export request into GenAI events (docs/ingest.md). A body that is not
 * OTLP/JSON throws OTLP_DECODE_FAILED naming a position or a field path.
 */
export function decodeOtlpLogsJson(text: string, options: DecodeOptions): DecodedLogs {
  const root = parseOtlpJson(text);
  const decoder = new LogsJsonDecoder(
    normaliseLimit(options.maxAttributeBytes),
    countLimitsOf(options),
  );
  walkOtlpJson(() => decoder.logsRequest(root), 'ExportLogsServiceRequest');
  return decoder.sorter.result();
}

/** `o[camel]`, else `o[snake]`; null is absent. */
function field(o: { [key: string]: unknown }, camel: string, snake: string): unknown {
  return nullToAbsent(o[camel] ?? o[snake]);
}

/** An id as lowercase hex; undefined when absent, malformed or all zeros. */
function logId(v: unknown, bytes: number): string | undefined {
  const id = jsonId(v, bytes);
  return id === undefined || id === '' || isZeroHex(id) ? undefined : id;
}

class LogsJsonDecoder extends JsonDecoder {
  readonly sorter = new LogRecordSorter();

  logsRequest(root: unknown): void {
    if (!isObject(root)) throw new ShapeError('the body must be a JSON object');
    this.each(root, 'resourceLogs', 'resource_logs', (resource) =>
      this.each(resource, 'scopeLogs', 'scope_logs', (scope) =>
        this.each(scope, 'logRecords', 'log_records', (record) => this.logRecord(record)),
      ),
    );
  }

  /** Calls `visit` on each object of the list `o.<camel>` (or `o.<snake>`), paths kept for errors. */
  private each(
    o: { [key: string]: unknown },
    camel: string,
    snake: string,
    visit: (item: { [key: string]: unknown }) => void,
  ): void {
    const items = arrayOrAbsent(field(o, camel, snake), camel);
    for (let i = 0; i < items.length; i++) {
      try {
        const item = items[i];
        if (!isObject(item)) throw new ShapeError('must be an object');
        visit(item);
      } catch (err) {
        throw within(err, camel, i);
      }
    }
  }

  private logRecord(v: { [key: string]: unknown }): void {
    const record: DecodedLogRecord = {
      traceId: logId(field(v, 'traceId', 'trace_id'), 16),
      spanId: logId(field(v, 'spanId', 'span_id'), 8),
      eventName: stringOrAbsent(field(v, 'eventName', 'event_name'), 'eventName'),
      time: time(field(v, 'timeUnixNano', 'time_unix_nano'), 'timeUnixNano'),
      observedTime: time(
        field(v, 'observedTimeUnixNano', 'observed_time_unix_nano'),
        'observedTimeUnixNano',
      ),
      attributes: {},
      droppedAttributes: 0,
      body: undefined,
    };
    const skipped = this.attributes(
      v.attributes,
      record.attributes,
      'attributes',
      this.counts.maxAttributesPerEvent,
    );
    const sent = uint32(
      field(v, 'droppedAttributesCount', 'dropped_attributes_count'),
      'droppedAttributesCount',
    );
    record.droppedAttributes = skipped + sent;
    const body = objectOrAbsent(nullToAbsent(v.body), 'body');
    if (body !== undefined) record.body = this.anyValue(body, 0);
    this.sorter.add(record);
  }
}
