import type { Span } from '../../core/index.js';
import { isObject, jsonSafe, tryParse } from './values.js';

/**
 * The Touchstone logging SDK's record attributes (sdk/python), written on the one span each
 * logged record becomes. They state Record fields directly, so they win over anything derived
 * from other conventions:
 *
 * | attribute | Record field |
 * |---|---|
 * | `touchstone.record.input` / `.output` / `.reference` | `input` / `output` / `reference` (JSON text of the value) |
 * | `touchstone.record.context` | `context` (JSON list) |
 * | `touchstone.record.metadata` | `metadata` (JSON object, merged under the derived keys) |
 *
 * Labels travel as `touchstone.label.<key>`, as for every convention. Every value is JSON text so
 * a string and a number stay apart (`"42"` vs `42`); text that does not parse (cut by
 * `traces.max_attribute_bytes`) is kept as text.
 */

export const SDK_RECORD_PREFIX = 'touchstone.record.';

export interface SdkRecordFields {
  input?: unknown;
  output?: unknown;
  reference?: unknown;
  context?: unknown[];
  metadata?: Record<string, unknown>;
}

function decoded(span: Span, field: string): unknown {
  const raw = span.attributes[SDK_RECORD_PREFIX + field];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string') return jsonSafe(raw);
  const parsed = tryParse(raw);
  return parsed.ok ? parsed.value : raw;
}

/** The Record fields a span states with the SDK's attributes; undefined when it states none. */
export function sdkRecordFields(span: Span): SdkRecordFields | undefined {
  let found = false;
  for (const key in span.attributes) {
    if (key.startsWith(SDK_RECORD_PREFIX)) {
      found = true;
      break;
    }
  }
  if (!found) return undefined;
  const out: SdkRecordFields = {};
  const input = decoded(span, 'input');
  const output = decoded(span, 'output');
  const reference = decoded(span, 'reference');
  if (input !== undefined) out.input = input;
  if (output !== undefined) out.output = output;
  if (reference !== undefined) out.reference = reference;
  const context = decoded(span, 'context');
  if (Array.isArray(context)) out.context = context;
  else if (context !== undefined && context !== null) out.context = [context];
  const metadata = decoded(span, 'metadata');
  if (isObject(metadata)) out.metadata = metadata;
  return out;
}
