/**
 * Regenerates the web UI's screenshots in docs/images/ from the browser suite: runs
 * test/ui/walkthrough.browser.test.ts (Debian's Chromium, real server, real data), which saves
 * every page under test-results/ui/, and copies the ones docs/ui.md shows.
 * `npm run docs:screenshots`.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const SHOWN = ['traces', 'trace', 'scores', 'sources', 'run', 'policy'];

const vitest = join(
  dirname(createRequire(import.meta.url).resolve('vitest/package.json')),
  'vitest.mjs',
);
execFileSync(process.execPath, [vitest, 'run', 'test/ui/walkthrough.browser.test.ts'], {
  stdio: 'inherit',
});
mkdirSync('docs/images', { recursive: true });
for (const name of SHOWN) {
  copyFileSync(join('test-results', 'ui', `${name}.png`), join('docs', 'images', `ui-${name}.png`));
  console.log(`docs/images/ui-${name}.png`);
}
