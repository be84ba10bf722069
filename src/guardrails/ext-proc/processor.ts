import type { Principal } from '../../auth/index.js';
import type { GuardDecision } from '../types.js';
import type { ProcessingRequest } from './gen/envoy/service/ext_proc/v3/external_processor_pb.js';
import { MessageTooLargeError } from './grpc-stream.js';
import type { Guard } from './guard-port.js';
import {
  maskedBody,
  type ParsedBody,
  parseRpcBody,
  RPC_INTERNAL_ERROR,
  RPC_PERMISSION_DENIED,
  RPC_RESOURCE_EXHAUSTED,
  type RpcCall,
  rejectCode,
  rpcError,
} from './json-rpc.js';
import {
  continueBody,
  continueHeaders,
  continueTrailers,
  headersOf,
  immediate,
  type Reply,
} from './messages.js';

/** What bounds and steers every stream (`guardrails.ext_proc` in the server config). */
export interface ExtProcSettings {
  /** The guard policy of a stream whose gateway names none in its metadata. */
  policy?: string;
  /** Pass when the processor cannot decide (no policy, decision past its deadline). */
  failOpen: boolean;
  maxBodyBytes: number;
  maxBatch: number;
  /** Longest wait for the first message, and for a request body its headers announced. */
  bodyTimeoutMs: number;
  /** Longest wait for the guard's decision on one body. */
  decisionTimeoutMs: number;
}

/** Who the stream acts for and which policy it asks for (from the gateway's initial metadata). */
export type StreamCaller = { policy?: string; project?: string } & (
  | { principal: Principal }
  /** The gateway's credentials were refused: why, in safe words. */
  | { refused: string }
);

type Accepted = Extract<StreamCaller, { principal: Principal }>;

/** What one exchange has shown so far. */
interface Exchange {
  headers: Record<string, string>;
}

/** A refusal of the whole exchange: its HTTP status, JSON-RPC code and plain-text reason. */
interface Refusal {
  status: number;
  code: number;
  message: string;
}

const JSON_TYPE = 'application/json';
const TEXT_TYPE = 'text/plain; charset=utf-8';
const MAX_REASON = 200;

/**
 * One ext_proc stream, one HTTP exchange: each message is answered by one reply of the matching
 * kind, in order; an ImmediateResponse ends the exchange (and the stream). Request bodies are
 * expected buffered (the whole body, `end_of_stream` set). `tools/call` messages of a JSON-RPC
 * body go to the guard; everything else, and responses, pass. The first message, and a request
 * body its headers announce, must come within `bodyTimeoutMs`.
 */
export async function* processStream(
  requests: AsyncIterable<ProcessingRequest>,
  caller: StreamCaller,
  guard: Guard,
  settings: ExtProcSettings,
): AsyncGenerator<Reply> {
  const iterator = requests[Symbol.asyncIterator]();
  const exchange: Exchange = { headers: {} };
  let awaiting: 'message' | 'request body' | undefined = 'message';
  try {
    for (;;) {
      let next: Awaited<ReturnType<typeof nextWithin<ProcessingRequest>>>;
      try {
        next = await nextWithin(iterator, awaiting && settings.bodyTimeoutMs);
      } catch (err) {
        // A message past the transport's cap (a body far over max_body_bytes) is refused like
        // one just over it; any other read failure (bytes that do not decode, a stream cut) ends
        // the stream with its gRPC status.
        if (!(err instanceof MessageTooLargeError)) throw err;
        const message = `the request body is larger than ${settings.maxBodyBytes} bytes`;
        yield refusal(exchange, { status: 413, code: RPC_RESOURCE_EXHAUSTED, message });
        return;
      }
      if (next === 'timeout') {
        const message = `the gateway sent no ${awaiting} within ${settings.bodyTimeoutMs} ms`;
        yield refusal(exchange, { status: 408, code: RPC_INTERNAL_ERROR, message });
        return;
      }
      if (next.done === true) return;
      if ('refused' in caller) {
        const message = `guardrail refused the gateway's credentials: ${caller.refused}`;
        yield refusal(exchange, { status: 503, code: RPC_INTERNAL_ERROR, message });
        return;
      }
      // Observability mode: the gateway expects no answers.
      if (next.value.observabilityMode) continue;
      const step = await answer(next.value, exchange, caller, guard, settings);
      if (step === undefined) continue;
      yield step.reply;
      if (step.final === true) return;
      awaiting = step.awaitBody === true ? 'request body' : undefined;
    }
  } finally {
    void iterator.return?.();
  }
}

interface Step {
  reply: Reply;
  /** An ImmediateResponse: nothing more to answer. */
  final?: boolean;
  /** The request headers announce a body: bound the wait for it. */
  awaitBody?: boolean;
}

async function answer(
  request: ProcessingRequest,
  exchange: Exchange,
  caller: Accepted,
  guard: Guard,
  settings: ExtProcSettings,
): Promise<Step | undefined> {
  const message = request.request;
  switch (message.case) {
    case 'requestHeaders':
      exchange.headers = headersOf(message.value);
      return { reply: continueHeaders('request'), awaitBody: !message.value.endOfStream };
    case 'requestBody': {
      if (!message.value.endOfStream || message.value.body.length > settings.maxBodyBytes) {
        return unbuffered(exchange, message.value.body.length, settings);
      }
      return guardBody(message.value.body, exchange, caller, guard, settings);
    }
    case 'responseHeaders':
      return { reply: continueHeaders('response') };
    case 'responseBody':
      return { reply: continueBody('response') };
    case 'requestTrailers':
      return { reply: continueTrailers('request') };
    case 'responseTrailers':
      return { reply: continueTrailers('response') };
    default:
      // A message of a kind this proto does not know expects no answer we could give.
      return undefined;
  }
}

/** A body chunk that is not the whole body (not buffered, or past the gateway's buffer), or too large. */
function unbuffered(exchange: Exchange, bytes: number, settings: ExtProcSettings): Step {
  if (bytes > settings.maxBodyBytes) {
    return final(
      refusal(exchange, {
        status: 413,
        code: RPC_RESOURCE_EXHAUSTED,
        message: `the request body is larger than ${settings.maxBodyBytes} bytes`,
      }),
    );
  }
  if (settings.failOpen) return { reply: continueBody('request') };
  return final(
    refusal(exchange, {
      status: 503,
      code: RPC_INTERNAL_ERROR,
      message:
        "guardrail could not decide: the request body was not sent whole (set the gateway's request body mode to buffered)",
    }),
  );
}

const final = (reply: Reply): Step => ({ reply, final: true });

async function guardBody(
  body: Uint8Array,
  exchange: Exchange,
  caller: Accepted,
  guard: Guard,
  settings: ExtProcSettings,
): Promise<Step> {
  const parsed = parseRpcBody(body, settings.maxBatch);
  if (!parsed.ok) {
    // Not JSON and not sent as JSON: not MCP traffic, nothing this guard reads.
    if (parsed.code !== -32700 || isJson(exchange)) {
      return final(refusal(exchange, { status: 400, code: parsed.code, message: parsed.message }));
    }
    return { reply: continueBody('request') };
  }
  const toolCalls = parsed.calls.filter((c) => c.method === 'tools/call');
  if (toolCalls.length === 0) return { reply: continueBody('request') };
  const policy = caller.policy ?? settings.policy;
  const decisions =
    policy === undefined
      ? toolCalls.map(() =>
          cannotDecide(
            'no guard policy named (gateway metadata or guardrails.ext_proc.policy)',
            settings,
          ),
        )
      : await Promise.all(
          toolCalls.map((call) => decideWithin(guard, policy, call, exchange, caller, settings)),
        );
  return outcome(parsed, toolCalls, decisions, exchange);
}

/** The guard's decision on one call, or cannot-decide past the deadline. */
async function decideWithin(
  guard: Guard,
  policy: string,
  call: RpcCall,
  exchange: Exchange,
  caller: Accepted,
  settings: ExtProcSettings,
): Promise<GuardDecision> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<GuardDecision>((resolve) => {
    timer = setTimeout(
      () => resolve(cannotDecide(`no decision within ${settings.decisionTimeoutMs} ms`, settings)),
      settings.decisionTimeoutMs,
    );
  });
  const subject = {
    phase: 'request' as const,
    messages: [],
    mcp: {
      method: call.method,
      ...(call.toolName === undefined ? {} : { toolName: call.toolName }),
      ...(call.arguments === undefined ? {} : { arguments: call.arguments }),
    },
    headers: exchange.headers,
  };
  try {
    return await Promise.race([
      guard
        .decide(policy, subject, caller.principal, caller.project)
        .catch(() => cannotDecide('the guard failed', settings)),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function cannotDecide(why: string, settings: ExtProcSettings): GuardDecision {
  if (settings.failOpen) return { action: 'allow', reason: `fail-open: ${why}` };
  return {
    action: 'reject',
    status: 503,
    message: `guardrail could not decide: ${why}`,
    reason: 'cannot-decide',
  };
}

/** The reply for a body's decisions: a block answers every call, a mask rewrites the body. */
function outcome(
  parsed: Extract<ParsedBody, { ok: true }>,
  toolCalls: RpcCall[],
  decisions: GuardDecision[],
  exchange: Exchange,
): Step {
  const rejects = new Map<number, Extract<GuardDecision, { action: 'reject' }>>();
  const masks = new Map<number, unknown>();
  toolCalls.forEach((call, i) => {
    const decision = decisions[i] as GuardDecision;
    if (decision.action === 'reject') rejects.set(call.index, decision);
    else if (decision.action === 'mask' && decision.arguments !== undefined) {
      masks.set(call.index, decision.arguments);
    }
  });
  if (rejects.size > 0) return final(blocked(parsed, rejects, exchange));
  if (masks.size === 0) return { reply: continueBody('request') };
  return { reply: continueBody('request', maskedBody(parsed, masks)) };
}

/**
 * A blocked body, answered as its MCP client reads a failed call: HTTP 200 with a JSON-RPC
 * error for each call that has an id (the others of a batch are not sent either). A body whose
 * blocked calls are all notifications gets the reject's status and a JSON-RPC error without id.
 */
function blocked(
  parsed: Extract<ParsedBody, { ok: true }>,
  rejects: Map<number, Extract<GuardDecision, { action: 'reject' }>>,
  exchange: Exchange,
): Reply {
  const first = rejects.values().next().value as Extract<GuardDecision, { action: 'reject' }>;
  const answered = parsed.calls.filter((c) => c.hasId && c.method !== '');
  if (answered.length === 0) {
    return refusal(exchange, {
      status: first.status,
      code: rejectCode(first.status),
      message: first.message,
    });
  }
  const errors = answered.map((call) => {
    const reject = rejects.get(call.index);
    return reject === undefined
      ? rpcError(call.id, RPC_PERMISSION_DENIED, 'not sent: another call of this batch was blocked')
      : rpcError(call.id, rejectCode(reject.status), reject.message);
  });
  const body = JSON.stringify(parsed.batch ? errors : errors[0]);
  return immediate(200, JSON_TYPE, body, reasonOf(rejects));
}

function reasonOf(rejects: Map<number, { reason: string }>): string {
  return [...new Set([...rejects.values()].map((r) => r.reason))].join('; ').slice(0, MAX_REASON);
}

/**
 * A refusal as the client reads it: a JSON-RPC error without id to an MCP client (one that sends
 * or accepts JSON or event streams, or one not yet seen), else plain text.
 */
function refusal(exchange: Exchange, refused: Refusal): Reply {
  const accept = exchange.headers.accept ?? '';
  const mcp =
    exchange.headers[':method'] === undefined ||
    isJson(exchange) ||
    /application\/json|text\/event-stream/i.test(accept);
  if (mcp) {
    const body = JSON.stringify(rpcError(null, refused.code, refused.message));
    return immediate(refused.status, JSON_TYPE, body, refused.message);
  }
  return immediate(refused.status, TEXT_TYPE, refused.message, refused.message);
}

function isJson(exchange: Exchange): boolean {
  const type = exchange.headers['content-type']?.split(';')[0]?.trim().toLowerCase() ?? '';
  return type === JSON_TYPE || type.endsWith('+json');
}

/** The iterator's next message, or 'timeout' when none came within `ms` (undefined: no bound). */
async function nextWithin<T>(
  iterator: AsyncIterator<T>,
  ms: number | undefined,
): Promise<IteratorResult<T> | 'timeout'> {
  if (ms === undefined) return iterator.next();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([iterator.next(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
