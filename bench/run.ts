/**
 * Runs benchmarks: `npm run bench` (all) or `npm run bench -- evaluate`. Each prints its figures;
 * none asserts a time (budgets are compared by reading the output).
 */
const BENCHES: Record<string, () => Promise<void>> = {
  evaluate: async () => (await import('./evaluate.js')).main(),
  webhooks: async () => (await import('./webhooks.js')).main(),
  ingest: async () => (await import('./ingest.js')).main(),
  redaction: async () => (await import('./redaction.js')).main(),
};

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
for (const name of wanted.length > 0 ? wanted : Object.keys(BENCHES)) {
  const bench = BENCHES[name];
  if (bench === undefined) {
    console.error(`unknown benchmark "${name}"; known: ${Object.keys(BENCHES).join(', ')}`);
    process.exit(2);
  }
  console.log(`\n== bench/${name}`);
  await bench();
}
