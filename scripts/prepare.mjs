// Builds dist/ after `npm install` in a checkout so `npx touchstone` works without another step.
// Skipped when TypeScript is absent (an install from the registry ships dist/ already).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { build, staleness } from './build-dist.mjs';

try {
  createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  process.exit(0);
}
if (!existsSync('tsconfig.build.json')) process.exit(0);
const reason = staleness(process.cwd());
if (reason === undefined) {
  process.stderr.write('touchstone: dist/ is up to date with src/\n');
} else if (!build(process.cwd(), reason)) {
  process.exit(1);
}
