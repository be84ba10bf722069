import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import type { EvaluationObserver } from '../evaluators/index.js';

/**
 * Prometheus metrics: process metrics, HTTP requests by route and status, evaluator outcomes and
 * durations. One registry per app so tests can build several apps in one process.
 */
export class Metrics implements EvaluationObserver {
  readonly registry = new Registry();
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  private readonly evalResults: Counter<'evaluator' | 'outcome'>;
  private readonly evalDuration: Histogram<'evaluator'>;

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
    this.httpRequests = new Counter({
      name: 'touchstone_http_requests_total',
      help: 'HTTP requests by method, route template and status code.',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.httpDuration = new Histogram({
      name: 'touchstone_http_request_duration_seconds',
      help: 'HTTP request duration by method, route template and status code.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.evalResults = new Counter({
      name: 'touchstone_evaluator_results_total',
      help: 'Evaluator results by evaluator type and outcome.',
      labelNames: ['evaluator', 'outcome'],
      registers: [this.registry],
    });
    this.evalDuration = new Histogram({
      name: 'touchstone_evaluator_duration_seconds',
      help: 'Time one evaluator took on one record, by evaluator type.',
      labelNames: ['evaluator'],
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: [this.registry],
    });
  }

  onResult(type: string, outcome: string, durationMs: number): void {
    this.evalResults.inc({ evaluator: type, outcome });
    this.evalDuration.observe({ evaluator: type }, durationMs / 1000);
  }

  /** Records every response under its route template (never the raw URL: bounded label values). */
  instrument(app: FastifyInstance): void {
    app.addHook('onResponse', async (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched';
      const labels = { method: request.method, route, status: String(reply.statusCode) };
      this.httpRequests.inc(labels);
      this.httpDuration.observe(labels, reply.elapsedTime / 1000);
    });
  }
}
