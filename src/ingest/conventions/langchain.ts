import type { Span } from '../../core/index.js';
import { asString, decodeJsonEncoded, isObject, type JsonObject, sniffJson } from './values.js';

/**
 * LangChain shapes that several emitters (OpenInference, MLflow autolog, OpenLLMetry) serialize
 * into their own attributes: the ToolMessage that carries a tool's call id and success flag, and
 * the LangGraph run metadata that names the graph node a span belongs to.
 */

export interface ToolMessageReading {
  content: unknown;
  id?: string;
  name?: string;
  /** Set when the message says `status: "error"` (ToolNode caught the tool's exception). */
  error?: string;
}

function fromData(data: JsonObject): ToolMessageReading {
  const content = sniffJson(data.content);
  const out: ToolMessageReading = { content };
  const id = asString(data.tool_call_id)?.trim();
  if (id) out.id = id;
  const name = asString(data.name);
  if (name) out.name = name;
  if (data.status === 'error') {
    out.error = typeof content === 'string' && content ? content : 'tool returned an error';
  }
  return out;
}

/** A serialized LangChain ToolMessage in any of its dump forms, else undefined. */
export function readToolMessage(value: unknown): ToolMessageReading | undefined {
  if (!isObject(value)) return undefined;
  if (value.type === 'tool' && isObject(value.data)) return fromData(value.data);
  if (
    value.type === 'constructor' &&
    Array.isArray(value.id) &&
    String(value.id[value.id.length - 1]) === 'ToolMessage' &&
    isObject(value.kwargs)
  ) {
    return fromData(value.kwargs);
  }
  if (value.type === 'tool' && 'content' in value && 'tool_call_id' in value)
    return fromData(value);
  return undefined;
}

/**
 * The LangGraph node a span runs as, from the run metadata the emitters copy onto the span:
 * OpenInference `metadata` (JSON), MLflow `metadata` (JSON-encoded twice over), OpenLLMetry
 * `traceloop.association.properties.langgraph_node`.
 */
export function langGraphNode(span: Span): string | undefined {
  const direct = asString(span.attributes['traceloop.association.properties.langgraph_node']);
  if (direct) return direct;
  const meta = decodeJsonEncoded(span.attributes.metadata);
  if (isObject(meta)) return asString(meta.langgraph_node);
  return undefined;
}
