/**
 * Runs benchmarks: `npm run bench` (all but the fuzzer and the MLflow source bench) or
 * `npm run bench -- ingest fuzz`. Flags (`--name=value`) are left to the benchmarks.
 * Each prints its figures; none asserts a time (budgets are compared by reading the output).
 */
const BENCHES: Record<string, () => Promise<void>> = {
  evaluate: async () => (await import('./evaluate.js')).main(),
  guardrails: async () => (await import('./guardrails.js')).main(),
  // MCP tools/call through the Envoy external processor at 200/s (its own process).
  'guardrails-ext-proc': async () => (await import('./guardrails/ext-proc.js')).main(),
  ingest: async () => (await import('./ingest.js')).main(),
  online: async () => (await import('./online.js')).main(),
  // Per-record overhead of plug-in evaluators and records/s through a policy, beside built-ins.
  plugins: async () => (await import('./plugins/index.js')).main(),
  // 200 exporters for 60 s against the compiled server; by name only.
  overload: async () => (await import('./overload.js')).main(),
  normalize: async () => (await import('./normalize.js')).main(),
  // Span chunk formats 1 and 2: encode and parse CPU per span, characters per span.
  'chunk-format': async () => (await import('./chunk-format.js')).main(),
  // One-span traces to stored, complete and scored, on the compiled server (SQLite).
  'one-span': async () => (await import('./one-span.js')).main(),
  'otlp-decode': async () => (await import('./otlp-decode.js')).main(),
  // 1M scored traces loaded in bulk (`--traces=N` for fewer), SQLite then PostgreSQL (long).
  reads: async () => (await import('./reads/index.js')).main(),
  'results-insert': async () => (await import('./results-insert.js')).main(),
  redaction: async () => (await import('./redaction.js')).main(),
  runs: async () => (await import('./runs.js')).main(),
  sqlite: async () => (await import('./sqlite.js')).main(),
  // The SDK's venv (TOUCHSTONE_SDK_PYTHON), plus a live MLflow server when its venv is set.
  'sdk-python': async () => (await import('./sdk-python.js')).main(),
  webhooks: async () => (await import('./webhooks.js')).main(),
  mcp: async () => (await import('./mcp.js')).main(),
  // 1M traces written in bulk, SQLite then PostgreSQL (minutes); the UI's size and, with
  // Chromium, a trace page in the browser.
  ui: async () => (await import('./ui.js')).main(),
  // A live MLflow server (TOUCHSTONE_INTEROP_MLFLOW_PYTHON) and 10k traces (minutes); by name only.
  'source-mlflow': async () => (await import('./source-mlflow.js')).main(),
  // The fuzz targets of test/adversarial/fuzz for minutes each; by name only.
  fuzz: async () => (await import('./fuzz.js')).main(),
};
const BY_NAME_ONLY = new Set(['fuzz', 'overload', 'reads', 'source-mlflow']);

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const names = wanted.length > 0 ? wanted : Object.keys(BENCHES).filter((n) => !BY_NAME_ONLY.has(n));
for (const name of names) {
  const bench = BENCHES[name];
  if (bench === undefined) {
    console.error(`unknown benchmark "${name}"; known: ${Object.keys(BENCHES).join(', ')}`);
    process.exit(2);
  }
  console.log(`\n== bench/${name}`);
  await bench();
}
