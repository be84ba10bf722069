#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  process.stderr.write(
    'touchstone: dist/ is missing; run `npm run build` (npm install does it too).\n',
  );
  process.exit(1);
}
await import(main.href);
