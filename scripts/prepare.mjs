// Builds dist/ (the server and, with Vite, the web UI in dist/ui) after `npm install` in a
// checkout, so `npx touchstone` works without another step. Skipped when TypeScript is absent
// (an install from the registry ships dist/ already).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  process.exit(0);
}
if (!existsSync('tsconfig.build.json')) process.exit(0);
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });

let vite;
try {
  vite = join(dirname(require.resolve('vite/package.json')), 'bin', 'vite.js');
} catch {
  process.exit(0);
}
if (existsSync('ui/vite.config.ts')) {
  execFileSync(process.execPath, [vite, 'build', '--config', 'ui/vite.config.ts'], {
    stdio: 'inherit',
  });
}
