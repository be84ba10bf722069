import type { StoredTrace } from '../store/index.js';

/** Protobuf-JSON duration text (`2.4s`), as the spec's summary `duration`. */
function durationText(ms: number): string {
  return `${Number((ms / 1000).toFixed(9))}s`;
}

/**
 * The trace summary as the traces list, scores entries and `trace.scored` webhooks show it (one
 * shape everywhere, so it lives in the domain, not the HTTP edge).
 */
export function traceSummaryView(t: StoredTrace) {
  return {
    traceId: t.traceId,
    project: t.project,
    service: t.service,
    name: t.name,
    startTime: t.startTime,
    duration: durationText(t.durationMs),
    durationMs: t.durationMs,
    steps: t.steps,
    error: t.error,
    labels: t.labels,
    ...(t.source === '' ? {} : { source: t.source }),
  };
}
