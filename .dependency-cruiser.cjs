/**
 * DESIGN §2 import rules, checked on every `npm run lint`.
 * - core imports nothing internal;
 * - an area is entered only through its index.ts (no reaching into another area's files);
 * - domain areas never import the edges (api, cli, mcp) or the composition root;
 * - only app.ts and store tests import the concrete store adapters.
 */
const AREAS =
  '(core|config|store|auth|net|redaction|ingest|cel|evaluators|resources|policies|sources|webhooks|runs|datasets|idempotency|api|mcp|guardrails|plugins|cli|client)';
const DOMAIN =
  '(auth|net|redaction|ingest|cel|evaluators|resources|policies|sources|webhooks|runs|datasets|idempotency|store|config)';

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
      from: { path: `^src/${AREAS}/` },
      to: {
        path: `^src/${AREAS}/.+`,
        pathNot: [`^src/$1/`, `^src/${AREAS}/index\\.ts$`],
      },
    },
    {
      name: 'domain-not-edges',
      comment: 'domain areas never import the edges or the composition root',
      severity: 'error',
      from: { path: `^src/${DOMAIN}/` },
      to: { path: '^src/(api|cli|mcp)/|^src/(app|main)\\.ts$' },
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
      comment: 'only app.ts and store tests import concrete store adapters',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/store/', '^src/app\\.ts$'] },
      to: { path: '^src/store/(sqlite|postgres)/' },
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
