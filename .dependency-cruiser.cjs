/**
 * DESIGN §2 import rules, checked on every `npm run lint`.
 * - core imports nothing internal;
 * - an area is entered only through its index.ts (no reaching into another area's files), the
 *   composition root (app) and telemetry included, or through its state words (below): leaves,
 *   so a command talking to a server can name a run's states without loading the runs area;
 * - domain areas never import the edges (api, cli, mcp), telemetry or the composition root;
 * - only the CLI imports the composition root;
 * - only app/ and store tests import the concrete store adapters;
 * - an area's state words (its states.ts: a run's status, a source's phase, a delivery's state)
 *   are leaves that import nothing, and the only files of another area the store may import
 *   besides index.ts: the store records these words, and the area (which imports the store)
 *   owns them.
 * - nothing in src/ but its *.test.ts files imports test/.
 * - the store's row encoding (append-encoding.ts: core and the chunk format, no query builder)
 *   may be imported without the store's index, so that ingest's worker threads, which encode rows
 *   for the thread holding the store's connection, do not load the store.
 */
const AREAS =
  '(core|config|store|auth|net|redaction|ingest|cel|evaluators|resources|policies|sources|webhooks|runs|datasets|api|mcp|guardrails|plugins|cli|client|telemetry|app|operator)';
const STATE_WORDS = '^src/(runs|sources|webhooks)/states\\.ts$';
const ROW_ENCODING = '^src/store/append-encoding\\.ts$';
const DOMAIN =
  '(auth|net|redaction|ingest|cel|evaluators|resources|policies|sources|webhooks|runs|datasets|store|config)';

module.exports = {
  forbidden: [
    {
      name: 'core-is-a-leaf',
      comment: 'core holds domain types and must not import any other area',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'enter-areas-by-index',
      comment: 'import another area only through its index.ts (its public surface)',
      severity: 'error',
      from: { path: `^src/${AREAS}/`, pathNot: '^src/store/' },
      to: {
        path: `^src/${AREAS}/.+`,
        pathNot: [`^src/$1/`, `^src/${AREAS}/index\\.ts$`, STATE_WORDS, ROW_ENCODING],
      },
    },
    {
      name: 'store-enters-areas-by-index-or-state-words',
      comment:
        'the store imports another area through its index.ts, or its state words (states.ts): importing the index of an area that uses the store would be a cycle',
      severity: 'error',
      from: { path: '^src/store/' },
      to: {
        path: `^src/${AREAS}/.+`,
        pathNot: ['^src/store/', `^src/${AREAS}/index\\.ts$`, STATE_WORDS],
      },
    },
    {
      name: 'state-words-are-leaves',
      comment: "an area's states.ts imports nothing, so the store can import it without a cycle",
      severity: 'error',
      from: { path: STATE_WORDS },
      to: { path: '^src/' },
    },
    {
      name: 'domain-not-edges',
      comment:
        'domain areas never import the edges, telemetry (they report through observer interfaces) or the composition root',
      severity: 'error',
      from: { path: `^src/${DOMAIN}/` },
      to: { path: '^src/(api|cli|mcp|telemetry|app)/|^src/main\\.ts$' },
    },
    {
      name: 'only-cli-imports-app',
      comment: 'the composition root is the top: only the CLI (serve, local mode) builds from it',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(app|cli)/' },
      to: { path: '^src/app/' },
    },
    {
      name: 'net-imports-only-core',
      severity: 'error',
      from: { path: '^src/net/' },
      to: { path: '^src/', pathNot: '^src/(net|core)/' },
    },
    {
      name: 'cel-imports-only-core',
      comment: 'the CEL engine is shared by policies and sources and knows neither',
      severity: 'error',
      from: { path: '^src/cel/' },
      to: { path: '^src/', pathNot: '^src/(cel|core)/' },
    },
    {
      name: 'client-imports-nothing-internal',
      comment: 'the TS client ships to API users and webhook receivers: nothing from the server',
      severity: 'error',
      from: { path: '^src/client/' },
      to: { path: '^src/', pathNot: '^src/client/' },
    },
    {
      name: 'config-imports-only-core',
      severity: 'error',
      from: { path: '^src/config/' },
      to: { path: '^src/', pathNot: '^src/(config|core)/' },
    },
    {
      name: 'store-adapters-private',
      comment: 'only the composition root (app/) and store tests import concrete store adapters',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/store/', '^src/app/'] },
      to: { path: '^src/store/(sqlite|postgres)/' },
    },
    {
      name: 'src-not-test',
      comment:
        'shipped code never imports test/; only test files beside the code may use its helpers',
      severity: 'error',
      from: { path: '^src/', pathNot: '\\.test\\.ts$' },
      to: { path: '^test/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)node_modules/|\\.test\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
