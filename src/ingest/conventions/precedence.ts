import type { Message, Span, StepType, Usage } from '../../core/index.js';
import { langGraphNode } from './langchain.js';
import { isEmptyMessage, readMessages } from './messages.js';
import { requestMessages, responseMessages } from './payloads.js';
import type {
  ConventionReader,
  IoReading,
  MessagesReading,
  ModelReading,
  SpanContext,
  ToolCallReading,
  UsageReading,
} from './reader.js';
import { attributeLabels, LABEL_PREFIX } from './reader.js';
import { ALL, holding, inOrder, type Order, readersOf } from './readers.js';
import { asString, attrString, canonicalJson, tryParse, unwrapSingleKey } from './values.js';

/**
 * Conventions reference §10: when several conventions describe one span, each Step field is
 * decided separately, first present wins, in the orders below. No value is ever added across
 * conventions (dual emission is common: `prompt_tokens` next to `input_tokens` is one count).
 */

/** §10.1 steps 1–6: explicit kind attributes. */
const TYPE_EXPLICIT = holding(
  inOrder(['langfuse', 'mlflow', 'openinference', 'gen-ai', 'openllmetry', 'vercel-ai']),
  'stepType',
);
/** §10.1 steps 7–8: fingerprints (Logfire templates, Pydantic AI) before attribute presence. */
const TYPE_IMPLIED = holding(
  inOrder([
    'logfire',
    'gen-ai',
    'openinference',
    'vercel-ai',
    'openllmetry',
    'gen-ai-legacy',
    'langfuse',
  ]),
  'impliedType',
);
/** §10.2 llm steps: first source with messages (missing halves filled from the next ones). */
const MESSAGES = inOrder([
  'gen-ai',
  'openinference',
  'openllmetry',
  'vercel-ai',
  'logfire',
  'mlflow',
  'gen-ai-legacy',
  'langfuse',
]);
/** §10.2 tool steps, field by field. */
const TOOL = inOrder([
  'gen-ai',
  'vercel-ai',
  'langfuse',
  'mlflow',
  'openinference',
  'openllmetry',
  'logfire',
]);
/** §10.2 agent and generic steps, the Record's own input/output, and the llm fallback. */
const IO = inOrder([
  'langfuse',
  'mlflow',
  'openinference',
  'openllmetry',
  'gen-ai',
  'vercel-ai',
  'logfire',
]);
/** §10.3 name: tool and agent names (then span name). */
const NAME = inOrder(['gen-ai', 'openinference', 'vercel-ai', 'openllmetry', 'logfire']);
/** Other steps keep their span name unless it is a Logfire template (`logfire.msg`). */
const RENDERED_NAME = inOrder(['logfire']);
/** §10.3 model: every served model first, then every requested one. */
const MODEL = inOrder(['gen-ai', 'openinference', 'vercel-ai', 'langfuse', 'mlflow', 'logfire']);
/** §10.3 token counts, field by field. */
const USAGE = inOrder([
  'gen-ai',
  'openinference',
  'gen-ai-legacy',
  'openllmetry',
  'vercel-ai',
  'mlflow',
  'langfuse',
  'logfire',
]);
/** §10.3 cost. */
const COST = inOrder(['openinference', 'langfuse', 'mlflow', 'logfire', 'gen-ai']);
/** §10.3 session and user. */
const SESSION = holding(
  inOrder(['gen-ai', 'openinference', 'langfuse', 'mlflow', 'openllmetry', 'vercel-ai']),
  'session',
);
const USER = holding(
  inOrder(['openinference', 'langfuse', 'mlflow', 'openllmetry', 'vercel-ai']),
  'user',
);
/** Record-level input/output and convention-reported failures: only some readers have them. */
const TRACE_IO = holding(ALL, 'traceIo');
const ERROR = holding(ALL, 'error');

/** `handoff to <agent>` (OpenAI Agents' handoff tool). */
const HANDOFF_TO = /^handoff to (.+)$/i;
const ARROW = ' → ';
const HANDOFF_SUFFIX = '.handoff';
const HANDOFF_PREFIX = 'Handoff: ';

/** The Step fields of a span that cost parsing (messages, payloads), read only for steps. */
export interface SpanContent {
  /** Step name (tool name, agent name, rendered name, else span name). */
  name: string;
  model?: string;
  /** `model` is the model that answered, not only the one asked for. */
  modelServed?: boolean;
  input?: unknown;
  output?: unknown;
  tool?: ToolCallReading;
  usage?: Usage;
  /** '' when the span succeeded. */
  error: string;
}

/** What one span says, every field decided. */
export interface SpanReading {
  span: Span;
  type: StepType;
  /** An evaluation inside the trace (OpenInference EVALUATOR, …). */
  evaluator: boolean;
  /** Readers that recognised the span (a list shared by the spans of the same readers). */
  conventions: readonly string[];
  /** The span itself failed (status ERROR, or an exception event on a span not marked OK). */
  failed: boolean;
  session?: string;
  user?: string;
  labels: Record<string, string>;
  traceIo?: IoReading;
  /** Content fields, parsed on first use (most spans of a framework trace are never steps). */
  content(): SpanContent;
}

/** The reader methods asked about a span, each with the span and at most one more argument. */
type Method = Exclude<keyof ConventionReader, 'name' | 'reads'>;
/** What a method answers, when it answers. */
type Answer<M extends Method> = NonNullable<ReturnType<NonNullable<ConventionReader[M]>>>;

/**
 * A reader's answer; a reader that throws on garbage is treated as silent. The method is named,
 * not wrapped in a closure: a closure per field and span was a share of what normalization
 * allocated.
 */
function ask<M extends Method>(
  r: ConventionReader,
  method: M,
  span: Span,
  arg?: unknown,
): Answer<M> | undefined {
  const fn = r[method] as ((span: Span, arg?: unknown) => Answer<M> | undefined) | undefined;
  if (fn === undefined) return undefined;
  try {
    return fn.call(r, span, arg);
  } catch {
    return undefined;
  }
}

/**
 * The first answer in a precedence order, asking only the readers in `mask` (those that may say
 * anything about the span, `readersOf`).
 */
function first<M extends Method>(
  order: Order,
  mask: number,
  method: M,
  span: Span,
  arg?: unknown,
): Answer<M> | undefined {
  const { readers, bits } = order;
  for (let i = 0; i < readers.length; i++) {
    if ((mask & (bits[i] as number)) === 0) continue;
    const v = ask(readers[i] as ConventionReader, method, span, arg);
    if (v !== undefined) return v;
  }
  return undefined;
}

function handoffNames(span: Span): { from?: string; to?: string } | undefined {
  const own = span.name ? handoffOfName(span.name) : undefined;
  if (own !== undefined) return own;
  const rendered = attrString(span, 'logfire.msg');
  return rendered ? handoffOfName(rendered) : undefined;
}

/**
 * The agents a handoff span's name names: `handoff to <to>` (any case), `<from> → <to>.handoff`,
 * `Handoff: <from> → <to>`; split at the first arrow, each side non-empty, on one line. The arrow
 * forms are found with indexOf: as regular expressions (`^(.+?) → (.+)\.handoff$`) they rescanned
 * the rest of the text at every arrow, and `logfire.msg` can hold 64 KiB of arrows.
 */
export function handoffOfName(name: string): { from?: string; to?: string } | undefined {
  const to = HANDOFF_TO.exec(name)?.[1];
  if (to !== undefined) return { to };
  const suffixed = name.endsWith(HANDOFF_SUFFIX);
  const prefixed = name.startsWith(HANDOFF_PREFIX);
  if ((!suffixed && !prefixed) || hasLineBreak(name)) return undefined;
  return (
    (suffixed ? splitAtArrow(name.slice(0, -HANDOFF_SUFFIX.length)) : undefined) ??
    (prefixed ? splitAtArrow(name.slice(HANDOFF_PREFIX.length)) : undefined)
  );
}

function splitAtArrow(body: string): { from: string; to: string } | undefined {
  const arrow = body.indexOf(ARROW, 1);
  if (arrow < 0 || arrow + ARROW.length >= body.length) return undefined;
  return { from: body.slice(0, arrow), to: body.slice(arrow + ARROW.length) };
}

/** Whether `s` holds a character `.` does not match in a regular expression. */
function hasLineBreak(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x0a || c === 0x0d || c === 0x2028 || c === 0x2029) return true;
  }
  return false;
}

function stepType(
  span: Span,
  ctx: SpanContext,
  mask: number,
): { type: StepType; evaluator: boolean } {
  let reading =
    (mask & TYPE_EXPLICIT.any) === 0
      ? undefined
      : first(TYPE_EXPLICIT, mask, 'stepType', span, ctx);
  if (!reading) {
    const implied =
      (mask & TYPE_IMPLIED.any) === 0 ? undefined : first(TYPE_IMPLIED, mask, 'impliedType', span);
    reading = { type: implied ?? 'generic' };
  }
  let type = reading.type;
  // Overrides (§10.1): handoff names beat TOOL (OpenInference writes handoffs as tools) …
  if ((type === 'tool' || type === 'generic') && handoffNames(span)) type = 'handoff';
  // … a LangGraph node named like an agent is a container (§8.1, §8.4) …
  if (type === 'agent' && langGraphNode(span) === span.name) type = 'generic';
  // … and a nested OpenLLMetry workflow is a chain even with `invoke_agent` on it (§5.4).
  if (
    type === 'agent' &&
    !ctx.isRoot &&
    attrString(span, 'traceloop.span.kind') === 'workflow' &&
    !/agent/i.test(span.name)
  ) {
    type = 'generic';
  }
  return { type, evaluator: reading.evaluator === true };
}

function exceptionText(span: Span): string | undefined {
  for (const e of span.events) {
    if (e.name !== 'exception') continue;
    const type = asString(e.attributes['exception.type']);
    const message = asString(e.attributes['exception.message']);
    if (type && message) return `${type}: ${message}`;
    if (type || message) return type ?? message;
  }
  return undefined;
}

/**
 * Python tracers (OpenInference's LangChain instrumentor) append the traceback to the status
 * message; the step error keeps the message, the traceback stays in the exception event.
 */
function withoutTraceback(message: string | undefined): string | undefined {
  if (message === undefined) return undefined;
  const at = message.indexOf('Traceback (most recent call last):');
  return at < 0 ? message : asString(message.slice(0, at).trim());
}

/** Status ERROR → its message, else the exception event; an exception alone counts unless OK. */
function spanError(span: Span): string {
  const code = span.status?.code;
  if (code === 2) {
    return (
      withoutTraceback(asString(span.status.message)) ??
      exceptionText(span) ??
      attrString(span, 'error.type') ??
      'error'
    );
  }
  if (code !== 1) return exceptionText(span) ?? '';
  return '';
}

/**
 * The text view of an agent's (or the Record's) input or output (§10.2): single-key wrappers
 * are unwrapped (`{"question": …}`, `{"messages": […]}`, §0.3 b), and a chat transcript reads as
 * its last user text (input) or final assistant text (output). A transcript without such a text
 * stays a message list; the full transcript is in the trajectory anyway. Empty messages (a
 * model's empty reply) are left out: a transcript of nothing else is no value at all.
 */
export function textView(value: unknown, side: 'input' | 'output'): unknown {
  const unwrapped = unwrapSingleKey(value);
  if (typeof unwrapped !== 'object' || unwrapped === null) return unwrapped;
  const read = readMessages(unwrapped);
  if (!read) return unwrapped;
  const messages = read.filter((m) => !isEmptyMessage(m));
  if (messages.length === 0) return undefined;
  const role = side === 'input' ? 'user' : 'assistant';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role !== role) continue;
    if (typeof m.content === 'string' && m.content !== '') return m.content;
    // An assistant turn that only calls tools is not the answer; keep looking back for input only.
    if (side === 'output') break;
  }
  return messages;
}

function messages(span: Span, mask: number): MessagesReading {
  let input: Message[] | undefined;
  let output: Message[] | undefined;
  for (let i = 0; i < MESSAGES.readers.length; i++) {
    if ((mask & (MESSAGES.bits[i] as number)) === 0) continue;
    const m = ask(MESSAGES.readers[i] as ConventionReader, 'messages', span);
    if (!m) continue;
    if (!input && m.input && m.input.length > 0) input = m.input;
    if (!output && m.output && m.output.length > 0) output = m.output;
    if (input && output) break;
  }
  return { input, output };
}

function io(span: Span, type: StepType, mask: number): IoReading {
  const out: IoReading = {};
  for (let i = 0; i < IO.readers.length; i++) {
    if ((mask & (IO.bits[i] as number)) === 0) continue;
    const v = ask(IO.readers[i] as ConventionReader, 'io', span, type);
    if (!v) continue;
    if (out.input === undefined && v.input !== undefined) out.input = v.input;
    if (out.output === undefined && v.output !== undefined) out.output = v.output;
    if (out.input !== undefined && out.output !== undefined) break;
  }
  return out;
}

/**
 * The tool's parameter schema mistaken for its arguments: OpenInference's GenAI mirroring copies
 * `tool.parameters` into `gen_ai.tool.call.arguments` (seen in openinference-instrumentation-openai
 * 0.1.66). Arguments equal to the declared schema are not arguments.
 */
function isDeclaredSchema(span: Span, args: string): boolean {
  const schema = span.attributes['tool.parameters'];
  if (typeof schema !== 'string') return false;
  const a = tryParse(args.trim());
  const b = tryParse(schema.trim());
  return a.ok && b.ok && canonicalJson(a.value) === canonicalJson(b.value);
}

function toolCall(span: Span, mask: number): ToolCallReading {
  const out: ToolCallReading = {};
  for (let i = 0; i < TOOL.readers.length; i++) {
    if ((mask & (TOOL.bits[i] as number)) === 0) continue;
    const t = ask(TOOL.readers[i] as ConventionReader, 'toolCall', span);
    if (!t) continue;
    out.name ??= t.name;
    out.id ??= t.id;
    if (
      out.arguments === undefined &&
      t.arguments !== undefined &&
      !isDeclaredSchema(span, t.arguments)
    ) {
      out.arguments = t.arguments;
    }
    if (!out.resultPresent && t.resultPresent) {
      out.result = t.result;
      out.resultPresent = true;
      if (t.error) out.error = t.error;
    }
  }
  return out;
}

/** Where each cost reader sits in USAGE: the cost is picked from the same readings. */
const COST_AT = COST.readers.map((r) => USAGE.readers.indexOf(r));

/**
 * The readings of the span being read, one slot per reader of USAGE (or MODEL), reused from span
 * to span: an array per span was a share of what normalization allocated. Every slot is written
 * and then read within one call, never across one (readers do not call back into precedence).
 */
const USAGE_READINGS: (UsageReading | undefined)[] = USAGE.readers.map(() => undefined);
const MODEL_READINGS: (ModelReading | undefined)[] = MODEL.readers.map(() => undefined);

function pick(
  readings: readonly (UsageReading | undefined)[],
  key: keyof UsageReading,
): number | undefined {
  for (let i = 0; i < readings.length; i++) {
    const v = readings[i]?.[key];
    if (v !== undefined) return v;
  }
  return undefined;
}

/** Each reader's reading in an order into `out`; none for the readers not in `mask`. */
function readingsInto<M extends Method>(
  out: (Answer<M> | undefined)[],
  order: Order,
  mask: number,
  method: M,
  span: Span,
): (Answer<M> | undefined)[] {
  for (let i = 0; i < order.readers.length; i++) {
    out[i] =
      (mask & (order.bits[i] as number)) === 0
        ? undefined
        : ask(order.readers[i] as ConventionReader, method, span);
  }
  return out;
}

/** Each reader's reading in an order; none for the readers not in `mask`. */
function readingsOf<M extends Method>(
  order: Order,
  mask: number,
  method: M,
  span: Span,
): (Answer<M> | undefined)[] {
  return readingsInto([], order, mask, method, span);
}

function usage(span: Span, mask: number): Usage | undefined {
  const readings = readingsInto(USAGE_READINGS, USAGE, mask, 'usage', span);
  const input = pick(readings, 'inputTokens');
  const output = pick(readings, 'outputTokens');
  let total = pick(readings, 'totalTokens');
  if (total === undefined && input !== undefined && output !== undefined) {
    if (Number.isFinite(input + output)) total = input + output;
  }
  let cost: number | undefined;
  for (let i = 0; i < COST_AT.length && cost === undefined; i++) {
    cost = readings[COST_AT[i] as number]?.costUsd;
  }
  if (input === undefined && output === undefined && total === undefined && cost === undefined) {
    return undefined;
  }
  // Keys in the order they were always written: the stored Record keeps them in this order.
  const out: Usage = {};
  if (input !== undefined) out.inputTokens = input;
  if (output !== undefined) out.outputTokens = output;
  if (total !== undefined) out.totalTokens = total;
  if (cost !== undefined) out.costUsd = cost;
  return out;
}

/** The served model of any convention before any requested one (§10.3). */
function model(span: Span, mask: number): { name: string; served: boolean } | undefined {
  const readings = readingsInto(MODEL_READINGS, MODEL, mask, 'model', span);
  let served: string | undefined;
  let requested: string | undefined;
  for (let i = 0; i < readings.length && served === undefined; i++) {
    const m = readings[i];
    if (m === undefined) continue;
    served = m.response;
    requested ??= m.request;
  }
  if (served !== undefined) return { name: served, served: true };
  return requested === undefined ? undefined : { name: requested, served: false };
}

/** The readers that find labels in containers of their convention. */
const LABEL_READERS = ALL.readers.reduce(
  (mask, r, i) => (r.labels === undefined ? mask : mask | (ALL.bits[i] as number)),
  0,
);

/** The labels of a span without any: one object for all of them (nothing writes to a reading). */
const NO_LABELS: Record<string, string> = Object.freeze({}) as Record<string, string>;

function labels(span: Span, mask: number): Record<string, string> {
  const direct = attributeLabels(span.attributes);
  if ((mask & LABEL_READERS) === 0) return direct ?? NO_LABELS;
  // Most spans carry no label at all: look for the prefix once before asking the readers.
  let mentioned = direct !== undefined;
  for (const k in span.attributes) {
    if (mentioned) break;
    const v = span.attributes[k];
    mentioned = k.includes(LABEL_PREFIX) || (typeof v === 'string' && v.includes(LABEL_PREFIX));
  }
  if (!mentioned) return NO_LABELS;
  const out: Record<string, string> = {};
  // Container entries first, so a direct `touchstone.label.<key>` attribute wins over them.
  for (const v of readingsOf(ALL, mask, 'labels', span)) Object.assign(out, v);
  return Object.assign(out, direct);
}

function readContent(span: Span, type: StepType, mask: number): SpanContent {
  const content: SpanContent = { name: span.name, error: '' };
  const named =
    type === 'tool' || type === 'agent' || type === 'guardrail'
      ? first(NAME, mask, 'stepName', span, type)
      : first(RENDERED_NAME, mask, 'stepName', span, type);
  if (named) content.name = named;

  if (type === 'llm' || type === 'embedding') {
    const m = model(span, mask);
    if (m !== undefined) {
      content.model = m.name;
      content.modelServed = m.served;
    }
  }

  if (type === 'llm') {
    const m = messages(span, mask);
    content.input = m.input;
    content.output = m.output;
    if (!m.input || !m.output) {
      // Opaque values (OpenInference `input.value` is often the raw provider request): read as
      // a request/response when they are one, else keep them only when no messages exist at all.
      const v = io(span, type, mask);
      const none = !m.input && !m.output;
      content.input ??= requestMessages(v.input) ?? (none ? v.input : undefined);
      content.output ??= responseMessages(v.output) ?? (none ? v.output : undefined);
    }
  } else if (type === 'tool') {
    content.tool = toolCall(span, mask);
    if (content.tool.name && !named) content.name = content.tool.name;
  } else {
    const v = io(span, type, mask);
    const agentLike = type === 'agent' || type === 'generic';
    content.input = agentLike ? textView(v.input, 'input') : v.input;
    content.output = agentLike ? textView(v.output, 'output') : v.output;
    if (type === 'handoff') {
      const names = handoffNames(span);
      content.input ??= names?.from;
      content.output ??= names?.to;
    }
  }

  content.usage = usage(span, mask);
  content.error =
    spanError(span) ||
    content.tool?.error ||
    ((mask & ERROR.any) === 0 ? undefined : first(ERROR, mask, 'error', span)) ||
    '';
  return content;
}

/** The names of the readers in a mask, one frozen list per mask (a span's are never changed). */
const NAMES_OF = new Map<number, readonly string[]>();

function conventionsOf(span: Span, mask: number): readonly string[] {
  let detected = 0;
  for (let i = 0; i < ALL.readers.length; i++) {
    const bit = ALL.bits[i] as number;
    if ((mask & bit) !== 0 && ask(ALL.readers[i] as ConventionReader, 'detect', span))
      detected |= bit;
  }
  let names = NAMES_OF.get(detected);
  if (names === undefined) {
    names = Object.freeze(
      ALL.readers.filter((_, i) => (detected & (ALL.bits[i] as number)) !== 0).map((r) => r.name),
    );
    NAMES_OF.set(detected, names);
  }
  return names;
}

/** Reads one span: every Step field by the precedence of §10. Never throws. */
export function readSpan(span: Span, ctx: SpanContext): SpanReading {
  const mask = readersOf(span);
  const { type, evaluator } = stepType(span, ctx, mask);
  let content: SpanContent | undefined;
  // Every field in the literal: fields added afterwards made each reading grow its object.
  return {
    span,
    type,
    evaluator,
    conventions: conventionsOf(span, mask),
    failed: spanError(span) !== '',
    labels: labels(span, mask),
    session: (mask & SESSION.any) === 0 ? undefined : first(SESSION, mask, 'session', span),
    user: (mask & USER.any) === 0 ? undefined : first(USER, mask, 'user', span),
    traceIo: (mask & TRACE_IO.any) === 0 ? undefined : first(TRACE_IO, mask, 'traceIo', span),
    content: () => {
      content ??= readContent(span, type, mask);
      return content;
    },
  };
}
