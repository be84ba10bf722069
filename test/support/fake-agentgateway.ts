/**
 * A stand-in for agentgateway's prompt-guard webhook client (no gateway runs on the test
 * machines): it sends the requests the gateway sends (POST `/request` or `/response`, or the
 * path a `:path` header expression sets; `content-type: application/json`; the body types
 * GuardrailsPromptRequest and GuardrailsResponseRequest with exactly `role` and `content`) and
 * reads each answer as the gateway's serde types do: `action` is an untagged enum tried as Mask,
 * then Reject, then Pass, unknown fields ignored, the HTTP status never looked at. Then it applies
 * the outcome as the gateway would, failClosed: what the client would get.
 */

export interface WireMessage {
  role: string;
  content: string;
}

export type Phase = 'request' | 'response';

export type GatewayOutcome =
  | { kind: 'pass'; reason?: string }
  | { kind: 'mask'; messages: WireMessage[]; reason?: string }
  | { kind: 'reject'; status: number; body: string; reason?: string }
  /** A call error (unparseable answer, wrong mask kind, count mismatch, bad status): failClosed → 503. */
  | { kind: 'error'; why: string };

/** What the gateway's client would get, failClosed. */
export interface ClientView {
  status: number;
  body: string;
}

export type Send = (
  path: string,
  headers: Record<string, string>,
  body: string,
) => Promise<{ status: number; body: string }>;

const isString = (v: unknown): v is string => typeof v === 'string';
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
/** serde's `Option<String>`: absent, null, or a string. */
const optionalString = (v: unknown) => v === undefined || v === null || isString(v);

function message(v: unknown): WireMessage | undefined {
  return isObject(v) && isString(v.role) && isString(v.content)
    ? { role: v.role, content: v.content }
    : undefined;
}

function list<T>(v: unknown, item: (x: unknown) => T | undefined): T[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: T[] = [];
  for (const x of v) {
    const parsed = item(x);
    if (parsed === undefined) return undefined;
    out.push(parsed);
  }
  return out;
}

/** MaskActionBody: untagged PromptMessages | ResponseChoices. */
function maskBody(
  v: unknown,
): { messages: WireMessage[] } | { choices: WireMessage[] } | undefined {
  if (!isObject(v)) return undefined;
  const messages = list(v.messages, message);
  if (messages !== undefined) return { messages };
  const choices = list(v.choices, (c) => (isObject(c) ? message(c.message) : undefined));
  return choices === undefined ? undefined : { choices };
}

/** The gateway's reading of an answer body to a call that sent `sent` messages or choices. */
export function readAnswer(phase: Phase, sent: number, text: string): GatewayOutcome {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { kind: 'error', why: 'not JSON' };
  }
  if (!isObject(json) || !('action' in json)) return { kind: 'error', why: 'no action' };
  const action = json.action;
  if (!isObject(action)) return { kind: 'error', why: 'action is not an object' };
  const reason = optionalString(action.reason) ? (action.reason as string | undefined) : undefined;
  const withReason = reason === undefined || reason === null ? {} : { reason };
  if (!optionalString(action.reason)) return { kind: 'error', why: 'reason is not a string' };
  const mask = maskBody(action.body);
  if (mask !== undefined) {
    if (phase === 'request' && !('messages' in mask))
      return { kind: 'error', why: 'choices on /request' };
    if (phase === 'response' && !('choices' in mask))
      return { kind: 'error', why: 'messages on /response' };
    const messages = 'messages' in mask ? mask.messages : mask.choices;
    if (phase === 'response' && messages.length !== sent)
      return { kind: 'error', why: 'choice count' };
    return { kind: 'mask', messages, ...withReason };
  }
  const status = action.status_code;
  if (
    isString(action.body) &&
    Number.isInteger(status) &&
    (status as number) >= 0 &&
    (status as number) <= 65535
  ) {
    if ((status as number) < 100 || (status as number) > 999)
      return { kind: 'error', why: 'status' };
    return { kind: 'reject', status: status as number, body: action.body, ...withReason };
  }
  return { kind: 'pass', ...withReason };
}

export class FakeAgentgateway {
  /** The bodies the gateway sent, in order. */
  readonly sent: unknown[] = [];

  constructor(
    private readonly send: Send,
    private readonly options: {
      /** The `:path` header expression's value; default `/request` and `/response`. */
      path?: (phase: Phase) => string;
      /** Headers set by the webhook's `headers` expressions and `forwardHeaderMatches`. */
      headers?: Record<string, string>;
    } = {},
  ) {}

  private async call(phase: Phase, body: unknown, count: number): Promise<GatewayOutcome> {
    this.sent.push(body);
    const path = this.options.path?.(phase) ?? `/${phase}`;
    const headers = { ...this.options.headers, 'content-type': 'application/json' };
    const answer = await this.send(path, headers, JSON.stringify(body));
    return readAnswer(phase, count, answer.body);
  }

  /** `/request` with a chat's messages (role and content only). */
  prompt(messages: WireMessage[]): Promise<GatewayOutcome> {
    const body = { body: { messages: messages.map(({ role, content }) => ({ role, content })) } };
    return this.call('request', body, messages.length);
  }

  /** `/response` with the LLM's choices. */
  completion(choices: WireMessage[]): Promise<GatewayOutcome> {
    const body = {
      body: { choices: choices.map(({ role, content }) => ({ message: { role, content } })) },
    };
    return this.call('response', body, choices.length);
  }

  /** What the client gets from a request-phase outcome, failClosed (null: forwarded to the LLM). */
  static clientView(phase: Phase, outcome: GatewayOutcome): ClientView | null {
    if (outcome.kind === 'reject') return { status: outcome.status, body: outcome.body };
    if (outcome.kind === 'error') {
      const what = phase === 'request' ? 'request' : 'response';
      return { status: 503, body: `failed to process LLM ${what}: prompt guard failed` };
    }
    return null;
  }
}
