/**
 * Span-level refusals shared by both decoders: the reasons are fixed sentences (they go into the
 * OTLP partial-success message), so they never carry span content.
 */

export const REJECT = {
  traceIdInvalid: 'span with a trace id that is not 16 bytes (32 hex characters)',
  traceIdZero: 'span with an all-zero trace id',
  spanIdInvalid: 'span with a span id that is not 8 bytes (16 hex characters)',
  spanIdZero: 'span with an all-zero span id',
  parentSpanIdInvalid: 'span with a parent span id that is neither empty nor 8 bytes',
  linkTraceIdInvalid: 'span with a link whose trace id is not 16 non-zero bytes',
  linkSpanIdInvalid: 'span with a link whose span id is not 8 non-zero bytes',
} as const;

export type RejectReason = (typeof REJECT)[keyof typeof REJECT];

/**
 * One refused span, so a client can tell which of its records failed: its position in the request
 * (spans counted from 0 in request order across every resourceSpans and scopeSpans) and its ids
 * as sent, when they have the right length. Never span content.
 */
export interface RejectedSpan {
  index: number;
  traceId?: string;
  spanId?: string;
  reason: RejectReason;
}

/** Refused spans listed one by one at most; past it only the count and reasons grow. */
export const MAX_LISTED_REJECTIONS = 1000;

/** Counts refused spans and keeps each distinct reason once, in first-seen order. */
export class Rejections {
  count = 0;
  readonly reasons: string[] = [];
  readonly spans: RejectedSpan[] = [];

  add(reason: RejectReason, where?: Omit<RejectedSpan, 'reason'>): void {
    this.count++;
    if (!this.reasons.includes(reason)) this.reasons.push(reason);
    if (where !== undefined && this.spans.length < MAX_LISTED_REJECTIONS) {
      this.spans.push({ ...where, reason });
    }
  }
}
