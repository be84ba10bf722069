/**
 * @module telemetry
 * Prometheus metrics: one registry per app, the counters and histograms behind the areas'
 * observer interfaces, and the gauges read from the database at scrape time. Domain areas never
 * import it (they report through their observer interfaces); the HTTP edge serves /metrics and
 * feeds it HTTP responses.
 */
export { registerStateGauges, type StateGaugeDeps } from './gauges.js';
export { Metrics } from './metrics.js';
