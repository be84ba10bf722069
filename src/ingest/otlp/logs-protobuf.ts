/**
 * OTLP `ExportLogsServiceRequest` (opentelemetry-proto logs/v1) in binary protobuf, decoded on the
 * trace decoder's wire primitives: the same bounds checks, AnyValue decoding, nesting cap and
 * attribute size cap. Resources and scopes are skipped: a log record's events join a span, which
 * brings its own.
 */
import { WireType } from '@bufbuild/protobuf/wire';
import type { DecodedLogs, DecodeOptions } from '../types.js';
import { countLimitsOf } from './attributes.js';
import { OtlpErrors } from './error-codes.js';
import { type DecodedLogRecord, LogRecordSorter } from './log-events.js';
import { DecodeFailure, isZero, ProtobufDecoder } from './protobuf.js';
import { normaliseLimit } from './truncate.js';

/**
 * Decodes a binary OTLP logs export request into GenAI events (docs/ingest.md). A body that
 * cannot be decoded throws OTLP_DECODE_FAILED naming a byte offset.
 */
export function decodeOtlpLogsProtobuf(body: Uint8Array, options: DecodeOptions): DecodedLogs {
  const decoder = new LogsProtobufDecoder(
    body,
    normaliseLimit(options.maxAttributeBytes),
    countLimitsOf(options),
  );
  try {
    decoder.logsRequest();
  } catch (err) {
    if (err instanceof DecodeFailure) {
      throw OtlpErrors.OTLP_DECODE_FAILED(
        `OTLP protobuf logs body could not be decoded: ${err.reason} at byte offset ${err.offset}`,
        { details: [{ path: `byte ${err.offset}`, message: err.reason }] },
      );
    }
    throw err;
  }
  return decoder.sorter.result();
}

class LogsProtobufDecoder extends ProtobufDecoder {
  readonly sorter = new LogRecordSorter();

  /** ExportLogsServiceRequest: 1 resource_logs. */
  logsRequest(): void {
    this.repeated(this.len, (end) => this.resourceLogs(end));
  }

  /**
   * Walks the messages of field 1 (ExportLogsServiceRequest) or 2 (ResourceLogs, ScopeLogs)
   * until `end`, skipping the other fields.
   */
  private repeated(end: number, each: (end: number) => void, field = 1): void {
    const r = this.reader;
    while (r.pos < end) {
      const start = r.pos;
      const tag = this.tag();
      if (tag === ((field << 3) | WireType.LengthDelimited)) {
        const e = this.delimited();
        each(e);
        this.close(e);
      } else if (tag >>> 3 === field) throw this.wrongType(start);
      else this.skip(tag, start);
    }
  }

  /** ResourceLogs: 2 scope_logs (1 resource and 3 schema_url are skipped). */
  private resourceLogs(end: number): void {
    this.repeated(end, (e) => this.scopeLogs(e), 2);
  }

  /** ScopeLogs: 2 log_records (1 scope and 3 schema_url are skipped). */
  private scopeLogs(end: number): void {
    this.repeated(end, (e) => this.logRecord(e), 2);
  }

  /**
   * LogRecord: 1 time_unix_nano, 2 severity_number, 3 severity_text, 5 body, 6 attributes,
   * 7 dropped_attributes_count, 8 flags, 9 trace_id, 10 span_id, 11 observed_time_unix_nano,
   * 12 event_name (4 is reserved).
   */
  private logRecord(end: number): void {
    const r = this.reader;
    const record: DecodedLogRecord = {
      traceId: undefined,
      spanId: undefined,
      eventName: '',
      time: '0',
      observedTime: '0',
      attributes: {},
      droppedAttributes: 0,
      body: undefined,
    };
    let attributes = 0;
    while (r.pos < end) {
      const start = r.pos;
      const tag = this.tag();
      switch (tag) {
        case (1 << 3) | WireType.Bit64:
          record.time = this.fixed64Decimal();
          break;
        case (11 << 3) | WireType.Bit64:
          record.observedTime = this.fixed64Decimal();
          break;
        case (2 << 3) | WireType.Varint:
          this.uint32();
          break;
        case (7 << 3) | WireType.Varint:
          record.droppedAttributes += this.uint32();
          break;
        case (3 << 3) | WireType.LengthDelimited:
          r.pos = this.delimited();
          break;
        case (5 << 3) | WireType.LengthDelimited: {
          const e = this.delimited();
          record.body = this.anyValue(e, 0);
          this.close(e);
          break;
        }
        case (6 << 3) | WireType.LengthDelimited:
          // Past the per-event limit a KeyValue is skipped unread, as on span events.
          if (++attributes > this.counts.maxAttributesPerEvent) {
            r.pos = this.delimited();
            record.droppedAttributes++;
          } else this.keyValueField(record.attributes, 0);
          break;
        case (8 << 3) | WireType.Bit32:
          this.skipFixed32();
          break;
        case (9 << 3) | WireType.LengthDelimited:
          record.traceId = this.id(16);
          break;
        case (10 << 3) | WireType.LengthDelimited:
          record.spanId = this.id(8);
          break;
        case (12 << 3) | WireType.LengthDelimited:
          record.eventName = this.stringField();
          break;
        default:
          if (tag >>> 3 <= 12 && tag >>> 3 !== 4) throw this.wrongType(start);
          this.skip(tag, start);
      }
    }
    this.sorter.add(record);
  }

  /** An id field as lowercase hex; undefined unless it is `bytes` long and not all zeros. */
  private id(bytes: number): string | undefined {
    const end = this.delimited();
    const at = this.reader.pos;
    this.reader.pos = end;
    return end - at === bytes && !isZero(this.buf, at, bytes) ? this.hex(at, bytes) : undefined;
  }
}
