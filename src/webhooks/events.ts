import type { Result, TraceSummary } from '../core/index.js';

/**
 * Webhook events: their names on the wire (`Touchstone-Event`, payload `type`) and in the API
 * (`WEBHOOK_EVENT_*`), and what each carries.
 */

/** Event type (header value) → the enum value the API shows in a webhook's `events`. */
export const WEBHOOK_EVENTS = {
  'run.finished': 'WEBHOOK_EVENT_RUN_FINISHED',
  'run.gate_failed': 'WEBHOOK_EVENT_RUN_GATE_FAILED',
  'trace.scored': 'WEBHOOK_EVENT_TRACE_SCORED',
  'alert.fired': 'WEBHOOK_EVENT_ALERT_FIRED',
  'alert.resolved': 'WEBHOOK_EVENT_ALERT_RESOLVED',
} as const;

export type WebhookEventType = keyof typeof WEBHOOK_EVENTS;
export type WebhookEventName = (typeof WEBHOOK_EVENTS)[WebhookEventType];

/** The test operation's event; never subscribed to, sent to one webhook on request. */
export const PING = 'ping';

const BY_NAME = new Map<string, WebhookEventType>(
  Object.entries(WEBHOOK_EVENTS).flatMap(([type, name]) => [
    [name, type as WebhookEventType],
    [type, type as WebhookEventType],
  ]),
);

/** `WEBHOOK_EVENT_RUN_FINISHED` or `run.finished` → `run.finished`; undefined when unknown. */
export function eventType(name: string): WebhookEventType | undefined {
  return BY_NAME.get(name);
}

/** A webhook with no events listed receives every event but this one (it can be very frequent). */
export function subscribes(events: readonly string[], type: WebhookEventType): boolean {
  return events.length === 0 ? type !== 'trace.scored' : events.includes(type);
}

/** A run as GetRun returns it. Its `spec` is left out of payloads. */
export interface RunPayload {
  id: string;
  status: string;
  gates?: readonly { passed: boolean; [field: string]: unknown }[];
  [field: string]: unknown;
}

/** A trace summary as ListTraces returns it (labels included). */
export interface TracePayload extends TraceSummary {
  [field: string]: unknown;
}

/** The alert body; the same body goes unsigned to a policy's own `alerts[].webhook` URL. */
export interface AlertPayload {
  policy: string;
  metric: string;
  firing: boolean;
  mean: number;
  n: number;
  below: number;
  /** RFC 3339. */
  at: string;
}

export type WebhookEvent =
  | { type: 'run.finished' | 'run.gate_failed'; project: string; run: RunPayload }
  | {
      type: 'trace.scored';
      project: string;
      /** Policy name. */
      policy: string;
      trace: TracePayload;
      /** That policy's results for the trace. */
      results: readonly Result[];
    }
  | {
      type: 'alert.fired' | 'alert.resolved';
      project: string;
      policy: string;
      alert: AlertPayload;
    };

/**
 * The events of a run reaching a final status: `run.finished`, then `run.gate_failed` when the
 * run FAILED with at least one failed gate.
 */
export function runFinishedEvents(project: string, run: RunPayload): WebhookEvent[] {
  const events: WebhookEvent[] = [{ type: 'run.finished', project, run }];
  const gateFailed =
    run.status === 'RUN_STATUS_FAILED' && (run.gates ?? []).some((g) => g.passed === false);
  if (gateFailed) events.push({ type: 'run.gate_failed', project, run });
  return events;
}

/** The event-specific fields of a payload, after the common envelope. */
export function eventFields(event: WebhookEvent): Record<string, unknown> {
  switch (event.type) {
    case 'run.finished':
    case 'run.gate_failed': {
      const { spec: _spec, ...run } = event.run;
      return { run };
    }
    case 'trace.scored':
      return { policy: event.policy, trace: event.trace, results: event.results };
    case 'alert.fired':
    case 'alert.resolved':
      return { policy: event.policy, alert: event.alert };
  }
}

/** What a delivery row records for the deliveries list: `runId`, or `traceId` with `policy`. */
export function eventRefs(event: WebhookEvent): {
  runId?: string;
  traceId?: string;
  policy?: string;
} {
  switch (event.type) {
    case 'run.finished':
    case 'run.gate_failed':
      return { runId: event.run.id };
    case 'trace.scored':
      return { traceId: event.trace.traceId, policy: event.policy };
    case 'alert.fired':
    case 'alert.resolved':
      return { policy: event.policy };
  }
}
