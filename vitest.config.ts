import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Kinds of test files that take longest (servers, browsers, child processes), in the order they
 * start when no earlier run's durations are cached (a fresh clone, as in CI): one started last
 * would hold up the end of the run while the other workers stand idle.
 */
const SLOW_FIRST = [
  /^test\/e2e\//,
  /^test\/interop\//,
  /^test\/ui\//,
  /^test\/k8s\//,
  /\.int\.test\.ts$/,
];

class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const path = (f: TestSpecification) => relative(this.ctx.config.root, f.moduleId);
    const known = sorted.some((f) =>
      this.ctx.cache.getFileTestResults(`${f.project.name}:${path(f)}`),
    );
    if (known) return sorted;
    const rank = (f: TestSpecification) => {
      const i = SLOW_FIRST.findIndex((r) => r.test(path(f)));
      return i === -1 ? SLOW_FIRST.length : i;
    };
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    sequence: { sequencer: SlowFirst },
  },
});
