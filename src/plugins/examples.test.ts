import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  EXAMPLES_DIR,
  MODULE_FILE,
  rebuild,
  sha256,
  TOOLCHAINS,
} from '../../examples/plugins/build.js';
import { bindEvaluators, defaultRegistry, runEvaluator } from '../evaluators/index.js';
import { PluginHost } from './host.js';

/**
 * The example plug-ins of examples/plugins, built by real toolchains (AssemblyScript, Go, C,
 * Rust): the committed modules verify through the committed index and pin file, score the same
 * records the same way in every language, replay byte for byte, and rebuild to the same bytes
 * wherever the toolchain is installed.
 */

const registry = defaultRegistry();
const host = new PluginHost(
  {
    index: join(EXAMPLES_DIR, 'index.yaml'),
    index_sha256_file: join(EXAMPLES_DIR, 'index.sha256'),
    reload_interval: 0,
    workers: 2,
    limits: {
      memory_mib: 64,
      max_memory_mib: 256,
      timeout: 20_000,
      max_timeout: 60_000,
      max_output_bytes: 2 ** 20,
      max_input_bytes: 4 * 2 ** 20,
      max_module_bytes: 32 * 2 ** 20,
    },
  },
  { registry },
);
beforeAll(() => host.load());
afterAll(() => host.stop());

const LANGUAGES = ['as', 'go', 'c', 'rust'];

async function evaluate(lang: string, record: Record<string, unknown>) {
  const [instance] = bindEvaluators([{ ref: `example.${lang}.exact_match` }], registry);
  return runEvaluator({ id: 'r1', ...record }, instance as NonNullable<typeof instance>, {});
}

describe.each(LANGUAGES)('the %s example', (lang) => {
  it('scores text records, skips others, and replays byte for byte', async () => {
    const same = await evaluate(lang, { output: ' Paris\n', reference: 'Paris' });
    expect(same).toMatchObject({ outcome: 'OUTCOME_SCORED', scores: [{ passed: true }] });
    const differ = await evaluate(lang, { output: 'Lyon', reference: 'Paris' });
    expect(differ).toMatchObject({ outcome: 'OUTCOME_SCORED', scores: [{ passed: false }] });
    // The module itself skips: output is JSON, not text.
    const json = await evaluate(lang, { output: { city: 'Paris' }, reference: 'Paris' });
    expect(json).toMatchObject({
      outcome: 'OUTCOME_SKIPPED',
      reason: 'output and reference must be text',
    });
    // The manifest's needs: no reference, skipped before the module runs.
    expect(await evaluate(lang, { output: 'Paris' })).toMatchObject({
      outcome: 'OUTCOME_SKIPPED',
      reason: 'record has no reference',
    });

    const again = await evaluate(lang, { output: ' Paris\n', reference: 'Paris' });
    expect(again.scores).toEqual(same.scores);
    const metadata = same.scores[0]?.metadata as { random: number; time: number };
    // The fixed wall clock (2022-01-01T00:00:00Z), a few reads in.
    expect(metadata.time).toBeGreaterThanOrEqual(1_640_995_200_000);
    expect(metadata.time).toBeLessThan(1_640_995_200_000 + 10_000);
    const other = await evaluate(lang, { id: 'r2', output: ' Paris\n', reference: 'Paris' });
    expect(other.scores[0]?.metadata?.random).not.toBe(metadata.random);
  });
});

describe('the committed example modules', () => {
  it('are each pinned by their manifest and listed with their sha256', () => {
    for (const t of TOOLCHAINS) {
      const manifest = parse(readFileSync(join(EXAMPLES_DIR, t.dir, 'manifest.yaml'), 'utf8'));
      const bytes = readFileSync(join(EXAMPLES_DIR, t.dir, MODULE_FILE));
      expect(manifest.spec.module.sha256).toBe(sha256(bytes));
      const factory = registry.get(manifest.spec.evaluators[0].name);
      expect(factory?.manifest.plugin?.sha256).toBe(sha256(bytes));
    }
  });

  it.each(TOOLCHAINS.map((t) => [t.dir, t] as const))(
    'rebuild from source to the same bytes where the toolchain exists (%s)',
    (dir, t) => {
      const version = t.version();
      const manifest = parse(readFileSync(join(EXAMPLES_DIR, dir, 'manifest.yaml'), 'utf8'));
      if (version === undefined) {
        console.warn(`${dir}: toolchain not installed; only the committed module was checked`);
        return;
      }
      const recorded = String(manifest.spec.build.toolchain);
      if (!recorded.includes(version.replace(/^rustc /, '').split(' ')[0] as string)) {
        console.warn(
          `${dir}: toolchain ${version} differs from the recorded ${recorded}; not compared`,
        );
        return;
      }
      expect(sha256(rebuild(t))).toBe(manifest.spec.module.sha256);
    },
    300_000,
  );
});
