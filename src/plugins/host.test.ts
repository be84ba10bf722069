import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../core/index.js';
import {
  bindEvaluators,
  defaultRegistry,
  type EvaluatorRegistry,
  runEvaluator,
} from '../evaluators/index.js';
import { PluginHost, type PluginHostSettings, type ReloadEvent } from './host.js';
import { sha256Hex } from './loader.js';
import { answering, command, type FixturePlugin, wat, writeChain } from './wat.testkit.js';

/** The trust chain, module outcomes as evaluation results, and hot reload. */

const root = mkdtempSync(join(tmpdir(), 'touchstone-plugins-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const hosts: PluginHost[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.stop()));
});

const LIMITS: PluginHostSettings['limits'] = {
  memory_mib: 64,
  max_memory_mib: 256,
  timeout: 10_000,
  max_timeout: 60_000,
  max_output_bytes: 2 ** 20,
  max_input_bytes: 4 * 2 ** 20,
  max_module_bytes: 32 * 2 ** 20,
};

const passedScore = [{ name: 'ok', kind: 'passed' }];
const evaluator = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  scores: passedScore,
  ...extra,
});

let dirs = 0;
function chain(plugins: FixturePlugin[]) {
  const dir = join(root, `chain-${dirs++}`);
  return { dir, ...writeChain(dir, plugins) };
}

async function host(
  plugins: FixturePlugin[],
  extra: Partial<PluginHostSettings> = {},
  onReload?: (e: ReloadEvent) => void,
): Promise<{ host: PluginHost; registry: EvaluatorRegistry; dir: string; index: string }> {
  const c = chain(plugins);
  const registry = defaultRegistry();
  const h = new PluginHost(
    {
      index: c.index,
      index_sha256: c.sha256,
      reload_interval: 0,
      workers: 2,
      limits: LIMITS,
      ...extra,
    },
    { registry, ...(onReload === undefined ? {} : { onReload }) },
  );
  hosts.push(h);
  await h.load();
  return { host: h, registry, dir: c.dir, index: c.index };
}

async function evaluate(
  registry: EvaluatorRegistry,
  ref: string,
  record: Record<string, unknown> = { id: 'r1', output: 'hello', reference: 'hello' },
  params?: Record<string, unknown>,
) {
  const [instance] = bindEvaluators(
    [{ ref, ...(params === undefined ? {} : { params }) }],
    registry,
  );
  return runEvaluator({ id: 'r1', ...record }, instance as NonNullable<typeof instance>, {});
}

async function refusal(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise;
  } catch (err) {
    if (isTouchstoneError(err)) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('the trust chain', () => {
  const plugin: FixturePlugin = {
    name: 'acme',
    module: answering('{"scores":[{"name":"ok","passed":true}]}'),
    evaluators: [evaluator('acme.ok')],
  };

  it('loads a pinned chain and registers each declared evaluator with its hashes', async () => {
    const { registry } = await host([plugin]);
    const factory = registry.get('acme.ok');
    expect(factory?.manifest.plugin).toMatchObject({
      name: 'acme',
      version: '1.0.0',
      sha256: sha256Hex(plugin.module),
    });
    expect(registry.get('exact-match')).toBeDefined();
  });

  it('refuses an index whose sha256 is not the pinned one, naming the file and both hashes', async () => {
    const c = chain([plugin]);
    const wrong = 'f'.repeat(64);
    const h = new PluginHost(
      { index: c.index, index_sha256: wrong, reload_interval: 0, workers: 1, limits: LIMITS },
      { registry: defaultRegistry() },
    );
    const err = await refusal(h.load());
    expect(err.code).toBe('PLUGIN_HASH_MISMATCH');
    expect(err.message).toContain(c.index);
    expect(err.message).toContain(c.sha256);
    expect(err.message).toContain(wrong);
  });

  it('refuses a manifest or a module changed after pinning, naming the file and both hashes', async () => {
    const c = chain([plugin]);
    const manifestFile = join(c.dir, 'acme', 'manifest.json');
    const pinned = sha256Hex(readFileSync(manifestFile));
    writeFileSync(manifestFile, `${readFileSync(manifestFile, 'utf8')}\n`);
    const settings = {
      index: c.index,
      index_sha256: c.sha256,
      reload_interval: 0,
      workers: 1,
      limits: LIMITS,
    };
    const err = await refusal(new PluginHost(settings, { registry: defaultRegistry() }).load());
    expect(err.code).toBe('PLUGIN_HASH_MISMATCH');
    expect(err.message).toContain(manifestFile);
    expect(err.message).toContain(pinned);
    expect(err.message).toContain(sha256Hex(readFileSync(manifestFile)));

    const d = chain([plugin]);
    const moduleFile = join(d.dir, 'acme', 'module.wasm');
    writeFileSync(moduleFile, answering('{"scores":[{"name":"ok","passed":false}]}'));
    const err2 = await refusal(
      new PluginHost(
        { ...settings, index: d.index, index_sha256: d.sha256 },
        { registry: defaultRegistry() },
      ).load(),
    );
    expect(err2.code).toBe('PLUGIN_HASH_MISMATCH');
    expect(err2.message).toContain(moduleFile);
    expect(err2.message).toContain(sha256Hex(plugin.module));
  });

  it('refuses an unknown abi, a refused module, a name clash and limits over the maxima', async () => {
    const c = chain([plugin]);
    const manifestFile = join(c.dir, 'acme', 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
    const rewrite = (m: unknown) => {
      const text = JSON.stringify(m);
      writeFileSync(manifestFile, text);
      const index = JSON.parse(readFileSync(c.index, 'utf8'));
      index.entries[0].manifest.sha256 = sha256Hex(Buffer.from(text));
      const indexText = JSON.stringify(index);
      writeFileSync(c.index, indexText);
      const settings = { index: c.index, index_sha256: sha256Hex(Buffer.from(indexText)) };
      return new PluginHost(
        { ...settings, reload_interval: 0, workers: 1, limits: LIMITS },
        { registry: defaultRegistry() },
      ).load();
    };
    const abi = await refusal(
      rewrite({ ...manifest, spec: { ...manifest.spec, abi: 'extism/v1' } }),
    );
    expect(abi.code).toBe('PLUGIN_MANIFEST_INVALID');
    expect(abi.message).toContain('spec.abi');
    const limits = await refusal(
      rewrite({ ...manifest, spec: { ...manifest.spec, limits: { memoryMiB: 512 } } }),
    );
    expect(limits.message).toContain('spec.limits.memoryMiB 512 is over');
    const clash = await refusal(
      rewrite({ ...manifest, spec: { ...manifest.spec, evaluators: [evaluator('exact-match')] } }),
    );
    expect(clash.code).toBe('PLUGIN_EVALUATOR_CONFLICT');

    const fetcher = chain([
      {
        name: 'net',
        module: wat(
          '(module (import "env" "fetch" (func)) (memory (export "memory") 1) (func (export "_start")))',
        ),
        evaluators: [evaluator('net.fetch')],
      },
    ]);
    const refused = await refusal(
      new PluginHost(
        {
          index: fetcher.index,
          index_sha256: fetcher.sha256,
          reload_interval: 0,
          workers: 1,
          limits: LIMITS,
        },
        { registry: defaultRegistry() },
      ).load(),
    );
    expect(refused.code).toBe('PLUGIN_MODULE_REFUSED');
    expect(refused.message).toContain('"env"."fetch" is not allowed');
  });
});

describe('outcomes', () => {
  const cases: [string, Uint8Array, Record<string, unknown>][] = [
    [
      'scores',
      answering('{"scores":[{"name":"ok","passed":true,"explanation":"fine"}]}'),
      {
        outcome: 'OUTCOME_SCORED',
        scores: [{ name: 'p.scores', passed: true, explanation: 'fine' }],
      },
    ],
    [
      'skip',
      answering('{"skip":{"reason":"no rubric"}}'),
      { outcome: 'OUTCOME_SKIPPED', reason: 'no rubric' },
    ],
    [
      'error',
      answering('{"error":{"message":"rubric broken"}}'),
      {
        outcome: 'OUTCOME_ERROR',
        reason: 'plug-in evaluator "p.error" reported an error: rubric broken',
      },
    ],
    [
      'not-json',
      answering('score: 1'),
      { outcome: 'OUTCOME_ERROR', reason: expect.stringContaining('not one UTF-8 JSON value') },
    ],
    [
      'undeclared',
      answering('{"scores":[{"name":"other","value":1}]}'),
      {
        outcome: 'OUTCOME_ERROR',
        reason: expect.stringContaining('"other" its manifest does not declare'),
      },
    ],
    [
      'wrong-kind',
      answering('{"scores":[{"name":"ok","value":0}]}'),
      {
        outcome: 'OUTCOME_ERROR',
        reason: expect.stringContaining('without exactly one passed value'),
      },
    ],
    [
      'two-kinds',
      answering('{"scores":[{"name":"ok","value":0,"passed":true}]}'),
      {
        outcome: 'OUTCOME_ERROR',
        reason: expect.stringContaining('without exactly one passed value'),
      },
    ],
    [
      'exit',
      command('(call $proc_exit (i32.const 3))'),
      { outcome: 'OUTCOME_ERROR', reason: 'plug-in evaluator "p.exit" exited with code 3' },
    ],
    [
      'trap',
      command('(unreachable)'),
      {
        outcome: 'OUTCOME_ERROR',
        reason: expect.stringContaining('trapped: RuntimeError: unreachable'),
      },
    ],
    [
      'empty',
      command('(nop)'),
      { outcome: 'OUTCOME_ERROR', reason: expect.stringContaining('(0 bytes)') },
    ],
  ];

  it.each(cases)('maps %s', async (name, module, expected) => {
    const { registry } = await host([
      { name: `p-${name}`, module, evaluators: [evaluator(`p.${name}`)] },
    ]);
    const result = await evaluate(registry, `p.${name}`);
    expect(result).toMatchObject({ evaluator: `p.${name}`, scores: [], ...expected });
  });

  it('skips a record lacking a need without running the module', async () => {
    const { registry } = await host([
      {
        name: 'needy',
        module: command('(unreachable)'),
        evaluators: [evaluator('needy', { needs: ['reference'] })],
      },
    ]);
    const result = await evaluate(registry, 'needy', { output: 'x' });
    expect(result).toMatchObject({ outcome: 'OUTCOME_SKIPPED', reason: 'record has no reference' });
  });

  it('validates params against the manifest schema when binding', async () => {
    const { registry } = await host([
      {
        name: 'param',
        module: answering('{"scores":[{"name":"ok","passed":true}]}'),
        evaluators: [
          evaluator('param', {
            paramsSchema: {
              type: 'object',
              properties: { threshold: { type: 'number' } },
              additionalProperties: false,
            },
          }),
        ],
      },
    ]);
    expect(() =>
      bindEvaluators([{ ref: 'param', params: { threshold: 'high' } }], registry),
    ).toThrow(/invalid params for evaluator "param": .*\/threshold must be number/);
    expect((await evaluate(registry, 'param', {}, { threshold: 0.5 })).outcome).toBe(
      'OUTCOME_SCORED',
    );
  });

  it('ends an endless module at its deadline as an error, and the next record runs', async () => {
    const { registry, host: h } = await host([
      {
        name: 'spin',
        module: command('(loop $l (br $l))'),
        evaluators: [evaluator('spin')],
        limits: { timeoutMs: 300 },
      },
      {
        name: 'fine',
        module: answering('{"scores":[{"name":"ok","passed":true}]}'),
        evaluators: [evaluator('fine')],
      },
    ]);
    const spun = await evaluate(registry, 'spin');
    expect(spun).toMatchObject({
      outcome: 'OUTCOME_ERROR',
      reason: 'plug-in evaluator "spin" exceeded its deadline of 300 ms and was stopped',
    });
    expect(h.pool.replaced).toBeGreaterThanOrEqual(1);
    expect((await evaluate(registry, 'fine')).outcome).toBe('OUTCOME_SCORED');
  });

  it('refuses a request over the input cap before running the module', async () => {
    const { registry } = await host(
      [{ name: 'small', module: answering('{"scores":[]}'), evaluators: [evaluator('small')] }],
      { limits: { ...LIMITS, max_input_bytes: 1000 } },
    );
    const result = await evaluate(registry, 'small', { output: 'x'.repeat(2000) });
    expect(result.outcome).toBe('OUTCOME_ERROR');
    expect(result.reason).toContain('over the cap of 1000');
    expect(result.reason).not.toContain('xxxx');
  });
});

describe('hot reload', () => {
  it('loads a changed index and pin, and keeps the verified plug-ins when a change does not verify', async () => {
    const v1: FixturePlugin = {
      name: 'live',
      module: answering('{"scores":[{"name":"ok","passed":true}]}'),
      evaluators: [evaluator('live')],
    };
    const c = chain([v1]);
    const pinFile = join(c.dir, 'index.sha256');
    writeFileSync(pinFile, `${c.sha256}  index.json\n`);
    const events: ReloadEvent[] = [];
    const registry = defaultRegistry();
    const h = new PluginHost(
      {
        index: c.index,
        index_sha256_file: pinFile,
        reload_interval: 50,
        workers: 1,
        limits: LIMITS,
      },
      { registry, onReload: (e) => events.push(e) },
    );
    hosts.push(h);
    await h.load();
    h.start();
    // A policy's instance bound before the reload.
    const [instance] = bindEvaluators([{ ref: 'live' }], registry);
    const bound = instance as NonNullable<typeof instance>;
    expect((await runEvaluator({ id: 'r' }, bound, {})).scores[0]?.passed).toBe(true);

    // v2: same plug-in, new module; the index and the pin file are rewritten.
    const v2 = writeChain(c.dir, [
      { ...v1, version: '2.0.0', module: answering('{"scores":[{"name":"ok","passed":false}]}') },
    ]);
    writeFileSync(pinFile, `${v2.sha256}  index.json\n`);
    // The 50 ms poll may see the index before its pin (a refusal) and then both: the last
    // event is what counts.
    await expect
      .poll(() => events.at(-1), { timeout: 5_000 })
      .toMatchObject({ ok: true, indexSha256: v2.sha256 });
    expect(registry.get('live')?.manifest.plugin?.version).toBe('2.0.0');
    expect((await runEvaluator({ id: 'r' }, bound, {})).scores[0]?.passed).toBe(false);

    // A tampered index (pin unchanged) is refused; v2 keeps running. (The poll may read the
    // file while it is written, and refuse that too.)
    const accepted = events.length;
    writeFileSync(c.index, readFileSync(c.index, 'utf8').replace('2.0.0', '3.0.0'));
    await expect.poll(() => events.length, { timeout: 5_000 }).toBeGreaterThan(accepted);
    expect(events.slice(accepted).every((e) => !e.ok)).toBe(true);
    const refused = events.at(-1);
    expect(refused?.ok).toBe(false);
    const error = refused?.ok === false ? (refused.error as Error) : undefined;
    expect(error?.message).toContain(v2.sha256);
    expect(registry.get('live')?.manifest.plugin?.version).toBe('2.0.0');
    expect((await runEvaluator({ id: 'r' }, bound, {})).outcome).toBe('OUTCOME_SCORED');
  });
});
