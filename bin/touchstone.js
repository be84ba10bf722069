#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const main = new URL('dist/main.js', root);
// In a checkout (src/ beside dist/), dist/ is built first when it is missing or older than src/,
// so the command never runs code older than the sources it sits beside. An installed package
// has no src/ and runs its dist/ as it is.
if (existsSync(fileURLToPath(new URL('src/main.ts', root)))) {
  const { build, staleness } = await import(new URL('scripts/build-dist.mjs', root).href);
  const reason = staleness(fileURLToPath(root));
  if (reason !== undefined && !build(fileURLToPath(root), reason)) process.exit(1);
} else if (!existsSync(fileURLToPath(main))) {
  process.stderr.write('touchstone: dist/ is missing from this installation; reinstall it\n');
  process.exit(1);
}
// npx and npm scripts run us under `sh -c`, and npm forwards SIGTERM and SIGINT only to that
// shell, which dies without passing them on: `kill -TERM <npx pid>` would leave us running,
// orphaned. The shell's death shows as a new parent; it is taken as the SIGTERM it was.
if (process.env.npm_lifecycle_event !== undefined) {
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    process.kill(process.pid, 'SIGTERM');
  }, 250).unref();
}
await import(main.href);
