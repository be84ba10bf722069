import { randomBytes } from 'node:crypto';
import type { Span } from '../core/index.js';
import type { IngestService } from '../ingest/index.js';
import type { CheckOutcome, CompiledGuardPolicy, GuardRecorder } from './engine.js';
import type { GuardDecision, GuardSubject } from './types.js';

/**
 * Decisions of policies with `record: true` as traces of the policy's project (service
 * `touchstone-guard`): a root span per decision holding the messages as `gen_ai.input.messages`
 * (masked when the decision masked them; redacted at ingest like every trace) and the outcome, and a child span per check that ran.
 * Online policies and searches then treat guard decisions like any other trace. Stored in the
 * background: a decision never waits for its trace.
 */
export const GUARD_SERVICE = 'touchstone-guard';

const SCOPE = { name: 'touchstone.guardrails', version: '1' };

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const nanos = (ms: number) => `${BigInt(Math.round(ms * 1000)) * 1000n}`;

export class TraceRecorder implements GuardRecorder {
  constructor(
    private readonly deps: {
      ingest: Pick<IngestService, 'ingest'>;
      /** Told when a decision's trace could not be stored (the server log). */
      onError(err: unknown): void;
    },
  ) {}

  record(
    policy: CompiledGuardPolicy,
    subject: GuardSubject,
    decision: GuardDecision,
    checks: readonly CheckOutcome[],
    startedAt: number,
  ): void {
    const spans = decisionSpans(policy, subject, decision, checks, startedAt);
    const target = { project: policy.project, labels: {}, source: '' };
    this.deps.ingest
      .ingest(target, { spans, rejected: 0, rejectReasons: [] })
      .catch((err: unknown) => this.deps.onError(err));
  }
}

function decisionSpans(
  policy: CompiledGuardPolicy,
  subject: GuardSubject,
  decision: GuardDecision,
  checks: readonly CheckOutcome[],
  startedAt: number,
): Span[] {
  const traceId = hex(16);
  const rootId = hex(8);
  const resource = { 'service.name': GUARD_SERVICE };
  const total = checks.reduce((sum, c) => sum + c.ms, 0);
  const base = {
    traceId,
    kind: 1,
    events: [],
    links: [],
    resource,
    scope: SCOPE,
  };
  const output = [
    {
      role: 'assistant',
      content: decision.action === 'reject' ? decision.message : decision.reason,
    },
  ];
  const root: Span = {
    ...base,
    spanId: rootId,
    parentSpanId: '',
    name: `guard ${policy.name}`,
    startTimeUnixNano: nanos(startedAt),
    endTimeUnixNano: nanos(startedAt + total),
    status: { code: decision.action === 'reject' ? 2 : 1, message: '' },
    attributes: {
      'touchstone.guard.policy': policy.name,
      'touchstone.guard.phase': subject.phase,
      'touchstone.guard.action': decision.action,
      'touchstone.guard.reason': decision.reason,
      ...(subject.mcp === undefined
        ? {}
        : {
            'mcp.method.name': subject.mcp.method,
            ...(subject.mcp.toolName === undefined
              ? {}
              : { 'gen_ai.tool.name': subject.mcp.toolName }),
          }),
      // What went on past the guard: a masked prompt is recorded masked.
      'gen_ai.input.messages': JSON.stringify(
        decision.action === 'mask' ? decision.messages : subject.messages,
      ),
      'gen_ai.output.messages': JSON.stringify(output),
    },
  };
  let at = startedAt;
  const children = checks.map((c): Span => {
    const span: Span = {
      ...base,
      spanId: hex(8),
      parentSpanId: rootId,
      name: `check ${c.name}`,
      startTimeUnixNano: nanos(at),
      endTimeUnixNano: nanos(at + c.ms),
      status: { code: c.outcome === 'cannot_decide' ? 2 : 1, message: '' },
      attributes: {
        'touchstone.guard.check.type': c.type,
        'touchstone.guard.check.outcome': c.outcome,
      },
    };
    at += c.ms;
    return span;
  });
  return [root, ...children];
}
