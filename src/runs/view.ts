import type { RunItemResults, RunRecord } from '../store/index.js';
import { isFinal, type RunStatus } from './states.js';

/** How a run and its results read in the API (REST, CLI `--json`, webhook payloads). */

export interface RunView {
  id: string;
  name: string;
  project: string;
  labels: Record<string, string>;
  status: RunStatus;
  summaries: unknown[];
  /** Set with the final status: `{gate: {metric, min|max}, passed, value, reason?}`. */
  gates: { passed: boolean; [field: string]: unknown }[];
  createdBy: string;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  progress: { total: number; done: number };
  /** Why the run ended in ERROR. */
  error?: string;
  /** `:cancel` was asked while the run was running; it stops at its next write. */
  cancelRequested?: boolean;
  spec?: Record<string, unknown>;
  [field: string]: unknown;
}

/** The Run JSON; `spec` only when asked (GetRun), never in lists and webhook payloads. */
export function runView(run: RunRecord, withSpec = true): RunView {
  return {
    id: run.id,
    name: run.name,
    project: run.project,
    labels: run.labels,
    status: run.status,
    summaries: run.summaries ?? [],
    gates: (run.gates ?? []) as RunView['gates'],
    createdBy: run.createdBy,
    createdAt: run.createdAt,
    ...(run.startedAt === undefined ? {} : { startedAt: run.startedAt }),
    ...(run.finishedAt === undefined ? {} : { finishedAt: run.finishedAt }),
    progress: { total: run.total, done: run.done },
    ...(run.error === undefined ? {} : { error: run.error }),
    ...(run.cancelRequested && !isFinal(run.status) ? { cancelRequested: true } : {}),
    ...(withSpec && run.spec !== undefined ? { spec: run.spec } : {}),
  };
}

/** One item (record, trial) of the results list. */
export function itemView(item: RunItemResults): Record<string, unknown> {
  let output: unknown;
  if (item.output !== undefined) {
    try {
      output = JSON.parse(item.output) as unknown;
    } catch {
      output = undefined;
    }
  }
  return {
    recordId: item.recordId,
    recordIndex: item.recordIndex,
    trial: item.trial,
    ...(output === undefined ? {} : { generated: output }),
    ...(item.error === undefined ? {} : { error: item.error }),
    results: item.results,
  };
}
