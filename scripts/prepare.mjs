// Builds dist/ after `npm install` in a checkout so `npx touchstone` works without another step.
// Skipped when TypeScript is absent (an install from the registry ships dist/ already).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  process.exit(0);
}
if (!existsSync('tsconfig.build.json')) process.exit(0);
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
