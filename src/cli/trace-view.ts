import type { EvalRecord, Step, TraceSummary } from '../core/index.js';

/**
 * `touchstone traces get` for people: the trace's summary, its record's input and output, and the
 * trajectory as a tree of steps (parents by span id) with type, name, duration, error and a
 * one-line excerpt of each step's input and output. `--json` prints everything, uncut.
 */

/** Characters of an input or output excerpt. */
const EXCERPT = 100;

/** A value on one line: text as it is, chat messages by their last one, anything else as JSON. */
export function excerpt(value: unknown, max = EXCERPT): string {
  let text: string;
  if (value === undefined || value === null || value === '') return '-';
  if (typeof value === 'string') text = value;
  else if (Array.isArray(value) && value.length > 0 && value.every(isMessage)) {
    text = messagesText(value);
  } else text = JSON.stringify(value);
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

interface MessageLike {
  role: string;
  content?: unknown;
  toolCalls?: { name: string; arguments?: unknown }[];
}

function isMessage(v: unknown): v is MessageLike {
  return typeof v === 'object' && v !== null && typeof (v as { role?: unknown }).role === 'string';
}

/** `[3 messages] assistant: calls search_flights({"to":"CDG"})` */
function messagesText(messages: MessageLike[]): string {
  const last = messages.at(-1) as MessageLike;
  const calls = (last.toolCalls ?? []).map(
    (c) =>
      `${c.name}(${typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? '')})`,
  );
  const content =
    typeof last.content === 'string'
      ? last.content
      : last.content === undefined
        ? ''
        : JSON.stringify(last.content);
  const said = [content, calls.length > 0 ? `calls ${calls.join(', ')}` : '']
    .filter((s) => s !== '')
    .join(' ');
  const count = messages.length > 1 ? `[${messages.length} messages] ` : '';
  return `${count}${last.role}: ${said}`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(3)}s`;
}

function stepDuration(step: Step): string {
  if (step.start === undefined || step.end === undefined) return '-';
  return seconds(Date.parse(step.end) - Date.parse(step.start));
}

function usageText(usage: EvalRecord['usage']): string | undefined {
  if (usage === undefined) return undefined;
  const parts: string[] = [];
  if (usage.inputTokens !== undefined || usage.outputTokens !== undefined) {
    parts.push(`${usage.inputTokens ?? 0} in / ${usage.outputTokens ?? 0} out tokens`);
  }
  if (usage.costUsd !== undefined) parts.push(`$${usage.costUsd.toFixed(4)}`);
  return parts.length === 0 ? undefined : parts.join(', ');
}

/** Each step's children, in trajectory order; steps whose parent is not a step are roots. */
function tree(steps: readonly Step[]): { roots: Step[]; children: Map<Step, Step[]> } {
  const bySpan = new Map<string, Step>();
  for (const step of steps) if (step.spanId !== undefined) bySpan.set(step.spanId, step);
  const roots: Step[] = [];
  const children = new Map<Step, Step[]>();
  for (const step of steps) {
    const parent = step.parentSpanId === undefined ? undefined : bySpan.get(step.parentSpanId);
    if (parent === undefined || parent === step) roots.push(step);
    else children.set(parent, [...(children.get(parent) ?? []), step]);
  }
  return { roots, children };
}

function stepLines(
  step: Step,
  children: Map<Step, Step[]>,
  prefix: string,
  last: boolean,
  out: string[],
): void {
  const branch = last ? '└─ ' : '├─ ';
  const below = prefix + (last ? '   ' : '│  ');
  const kids = children.get(step) ?? [];
  const name =
    step.model !== undefined && !step.name.includes(step.model)
      ? `${step.name} (${step.model})`
      : step.name;
  const error = step.error === '' ? '' : `  ERROR ${excerpt(step.error)}`;
  out.push(
    `${prefix}${branch}${step.type.padEnd(9)} ${name || '-'}  ${stepDuration(step)}${error}`,
  );
  const detail = below + (kids.length > 0 ? '│  ' : '   ');
  out.push(`${detail}in:  ${excerpt(step.input)}`);
  out.push(`${detail}out: ${excerpt(step.output)}`);
  kids.forEach((kid, i) => {
    stepLines(kid, children, below, i === kids.length - 1, out);
  });
}

/** The readable view of a trace and its record. */
export function traceView(found: { trace: TraceSummary; record: EvalRecord }): string {
  const { trace, record } = found;
  const lines = [
    `trace ${trace.traceId}${trace.error ? '  ERROR' : ''}`,
    `  ${trace.service} / ${trace.name}  started ${trace.startTime}  took ${seconds(trace.durationMs)}  ${trace.steps} step(s)`,
  ];
  const labels = Object.entries(trace.labels).map(([k, v]) => `${k}=${v}`);
  if (labels.length > 0) lines.push(`  labels: ${labels.join(', ')}`);
  lines.push(`  input:  ${excerpt(record.input)}`, `  output: ${excerpt(record.output)}`);
  const usage = usageText(record.usage);
  if (usage !== undefined) lines.push(`  usage:  ${usage}`);
  const steps = record.trajectory ?? [];
  lines.push('', steps.length === 0 ? 'no steps' : 'trajectory:');
  const { roots, children } = tree(steps);
  roots.forEach((root, i) => {
    stepLines(root, children, '', i === roots.length - 1, lines);
  });
  return lines.join('\n');
}
