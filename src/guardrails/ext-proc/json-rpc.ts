/**
 * The MCP request body as the external processor sees it (JSON-RPC 2.0, one message or a batch):
 * parsing with the caps of a guard in the request path, and the JSON-RPC errors a block answers
 * with, which MCP clients read as the failure of their call.
 */

/** One JSON-RPC message of the body. `id` is absent on a notification. */
export interface RpcCall {
  /** Its place in the batch (0 for a single message). */
  index: number;
  method: string;
  hasId: boolean;
  id: string | number | null;
  /** `params.name` and `params.arguments` of a `tools/call`. */
  toolName?: string;
  arguments?: unknown;
}

export type ParsedBody =
  | { ok: true; batch: boolean; calls: RpcCall[]; messages: Record<string, unknown>[] }
  | { ok: false; code: number; message: string };

/** JSON-RPC error codes: the standard ones, and agentgateway's for a refused MCP call. */
export const RPC_PARSE_ERROR = -32700;
export const RPC_INVALID_REQUEST = -32600;
export const RPC_INTERNAL_ERROR = -32603;
export const RPC_PERMISSION_DENIED = -32001;
export const RPC_RESOURCE_EXHAUSTED = -32003;

/** Deepest nesting of arrays and objects accepted in a body (walks of the arguments recurse). */
export const MAX_JSON_DEPTH = 64;

type RpcId = string | number | null;

const fail = (code: number, message: string): ParsedBody => ({ ok: false, code, message });

/**
 * The body's JSON-RPC messages. A body that is not JSON, a message that is not a JSON-RPC 2.0
 * request or notification, a batch over `maxBatch` or nesting past MAX_JSON_DEPTH is refused,
 * naming what is wrong without quoting the body.
 */
export function parseRpcBody(body: Uint8Array, maxBatch: number): ParsedBody {
  let text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (jsonDepth(text) > MAX_JSON_DEPTH) {
    return fail(RPC_INVALID_REQUEST, `the body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fail(RPC_PARSE_ERROR, 'the body is not valid JSON');
  }
  const batch = Array.isArray(json);
  const items: unknown[] = Array.isArray(json) ? json : [json];
  if (batch && items.length === 0) return fail(RPC_INVALID_REQUEST, 'the batch is empty');
  if (items.length > maxBatch) {
    return fail(RPC_INVALID_REQUEST, `a batch holds at most ${maxBatch} messages`);
  }
  const calls: RpcCall[] = [];
  const messages: Record<string, unknown>[] = [];
  for (const [index, item] of items.entries()) {
    const call = readCall(item, index);
    if (typeof call === 'string') {
      return fail(RPC_INVALID_REQUEST, batch ? `message ${index}: ${call}` : call);
    }
    calls.push(call);
    messages.push(item as Record<string, unknown>);
  }
  return { ok: true, batch, calls, messages };
}

/** A JSON-RPC message as a call, or what is wrong with it. Responses (client → server) pass. */
function readCall(item: unknown, index: number): RpcCall | string {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) {
    return 'a JSON-RPC message must be an object';
  }
  const msg = item as Record<string, unknown>;
  if (msg.jsonrpc !== '2.0') return 'a JSON-RPC message must have "jsonrpc": "2.0"';
  const hasId = 'id' in msg;
  const id = msg.id;
  if (hasId && id !== null && typeof id !== 'string' && typeof id !== 'number') {
    return '"id" must be a string, a number or null';
  }
  if (!('method' in msg)) {
    // A client's answer to a server request (sampling, elicitation): nothing to guard.
    return { index, method: '', hasId, id: (id ?? null) as RpcId };
  }
  if (typeof msg.method !== 'string') return '"method" must be a string';
  const call: RpcCall = { index, method: msg.method, hasId, id: (id ?? null) as RpcId };
  if (msg.method !== 'tools/call') return call;
  const params = msg.params;
  if (typeof params !== 'object' || params === null || Array.isArray(params)) {
    return 'tools/call needs "params" with the tool\'s "name"';
  }
  const { name, arguments: args } = params as Record<string, unknown>;
  if (typeof name !== 'string' || name === '') return 'tools/call needs "params.name" (a string)';
  return { ...call, toolName: name, ...(args === undefined ? {} : { arguments: args }) };
}

/** Deepest nesting of `[` and `{` outside strings, in one pass without recursion. */
function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

/** A JSON-RPC error response object. */
export function rpcError(id: RpcId, code: number, message: string): Record<string, unknown> {
  return { jsonrpc: '2.0', id, error: { code, message } };
}

/** The JSON-RPC error code for a guard's reject status. */
export function rejectCode(status: number): number {
  if (status === 429) return RPC_RESOURCE_EXHAUSTED;
  return status >= 500 ? RPC_INTERNAL_ERROR : RPC_PERMISSION_DENIED;
}

/** The body with each masked call's `params.arguments` replaced (re-serialized JSON). */
export function maskedBody(
  parsed: { batch: boolean; messages: Record<string, unknown>[] },
  masked: ReadonlyMap<number, unknown>,
): Uint8Array {
  const messages = parsed.messages.map((msg, index) => {
    if (!masked.has(index)) return msg;
    const params = msg.params as Record<string, unknown>;
    return { ...msg, params: { ...params, arguments: masked.get(index) } };
  });
  return Buffer.from(JSON.stringify(parsed.batch ? messages : messages[0]), 'utf8');
}
