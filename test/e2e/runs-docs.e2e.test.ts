import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { OpenAiStub } from '../support/openai-stub.js';
import {
  type CliResult,
  cli,
  cliAsync,
  freePort,
  type ServerProcess,
  startServer,
} from '../support/process.js';

/**
 * docs/runs.md's examples, run as a reader would run them with the real CLI: every run spec, every
 * target and the environment (each inside a small spec), the retention config and the curl call.
 * What a reader brings is set up here: the dataset the examples name (uploaded, its path put where
 * the page shortens it to `0c5e…41`), a local OpenAI-compatible endpoint and agent in place of the
 * hosted ones, the variables the examples read, and an `agent.py`.
 */

const RUNS_MD = readFileSync('docs/runs.md', 'utf8');

/** The page's YAML examples, in order. */
const yamlBlocks = [...RUNS_MD.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] as string);

const DATASET = [
  {
    id: 't1',
    input: 'Where is my order?',
    output: 'It ships today.',
    reference: 'It ships today.',
  },
  { id: 't2', input: 'Can I return shoes?', output: 'Yes, within 30 days.', reference: 'Yes.' },
];

/** An agent behind HTTP, as the http target example expects it (`$.answer.text`, a bearer token). */
async function httpAgent(token: string): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      if (req.headers.authorization !== `Bearer ${token}`) {
        res.writeHead(401).end();
        return;
      }
      const { question } = JSON.parse(body) as { question: string };
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ answer: { text: `re: ${question}` } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/run`, server };
}

/** The target examples: blocks with a target and no evaluators. */
const targetBlocks = () =>
  yamlBlocks.filter((b) => /^target:/m.test(b) && !b.includes('evaluators:'));

const AGENT_PY = 'import sys\nprint("answer: " + sys.stdin.read().strip())\n';

// Each CLI process takes seconds on a loaded machine.
describe('docs/runs.md examples, run', { timeout: 300_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-runs-docs-'));
  const data = join(dir, 'data');
  const config = join(dir, 'touchstone.yaml');
  const openai = new OpenAiStub();
  let openaiBase: string;
  let agent: { url: string; server: Server };
  let datasetPath: string;
  const env = {
    OPENAI_API_KEY: 'sk-test-docs',
    AGENT_TOKEN: 'agent-token-docs',
    SEARCH_API_KEY: 'search-docs',
    AGENT_MODE: 'docs',
  };

  beforeAll(async () => {
    openaiBase = await openai.start();
    agent = await httpAgent(env.AGENT_TOKEN);
    writeFileSync(
      config,
      `judges:\n  gpt:\n    endpoint: ${openaiBase}\n    model: judge-model\n    credential: {env: OPENAI_API_KEY}\n`,
    );
    writeFileSync(join(dir, 'tickets.jsonl'), DATASET.map((r) => JSON.stringify(r)).join('\n'));
    writeFileSync(join(dir, 'agent.py'), AGENT_PY);
    mkdirSync(join(dir, 'agent'));
    writeFileSync(join(dir, 'agent', 'agent.py'), AGENT_PY);
    const up = cli([
      'datasets',
      'upload',
      join(dir, 'tickets.jsonl'),
      '--name',
      'tickets',
      '--project',
      'support',
      '--data-dir',
      data,
    ]);
    expect(up.code, up.stderr).toBe(0);
    datasetPath = up.stdout.trim();
  }, 120_000);
  afterAll(async () => {
    await openai.stop();
    agent?.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The example as a reader would have it: their dataset path and endpoints in place. */
  const localized = (text: string) =>
    text
      .replace(/datasets\/support\/tickets\/\S*…\S*\.jsonl/g, datasetPath)
      .replaceAll('https://api.openai.com/v1', openaiBase)
      .replaceAll('https://agent.internal.example/run', agent.url);

  /**
   * Runs a spec with `touchstone run` on the local data dir; its exit code and report. Not
   * `cli()`: the endpoints the run calls live in this process, which must keep answering.
   */
  const runSpec = (name: string, text: string): Promise<CliResult> => {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(file, localized(text));
    return cliAsync(['run', '-f', file, '--data-dir', data, '-c', config], env);
  };

  /** A finished run: SUCCEEDED (exit 0) or FAILED on a gate (exit 3), never refused or ERROR. */
  const expectRan = (r: CliResult) => {
    if (r.code !== 0 && r.code !== 3) throw new Error(`exit ${r.code}\n${r.stdout}\n${r.stderr}`);
    expect(r.stdout).toMatch(/: (SUCCEEDED|FAILED) in /);
    expect(r.stdout).toMatch(/\b[1-9]\d*\/\d+\/\d+\n/);
  };

  it('finds the examples it runs', () => {
    expect(yamlBlocks.filter((b) => b.includes('evaluators:'))).toHaveLength(2);
    expect(targetBlocks()).toHaveLength(3);
    expect(
      yamlBlocks.filter((b) => /^environment:/m.test(b) && !b.includes('evaluators:')),
    ).toHaveLength(1);
    expect(yamlBlocks.filter((b) => /^runs:/m.test(b))).toHaveLength(1);
  });

  it('runs the run specs, plain and declarative', async () => {
    for (const [i, spec] of yamlBlocks.filter((b) => b.includes('evaluators:')).entries()) {
      const r = await runSpec(`spec-${i}`, spec);
      expectRan(r);
      expect(r.stdout).toContain('"support-nightly" (project support)');
    }
    // The plain spec's target and judge were called, with the key the spec names.
    expect(openai.requests.length).toBeGreaterThan(0);
    expect(openai.requests[0]?.headers.authorization).toBe(`Bearer ${env.OPENAI_API_KEY}`);
  });

  it('runs each target example, and the environment example, inside a small spec', async () => {
    const around = (snippet: string, extra = '') =>
      `name: docs-target\nproject: support\ndataset: {path: ${datasetPath}}\nevaluators: [{ref: exact-match}]\n${extra}${snippet}`;
    const targets = targetBlocks();
    for (const [i, target] of targets.entries()) {
      expectRan(await runSpec(`target-${i}`, around(target)));
    }
    const environment = yamlBlocks.find(
      (b) => /^environment:/m.test(b) && !b.includes('evaluators:'),
    ) as string;
    expectRan(
      await runSpec(
        'environment',
        around(environment, 'target: {kind: command, argv: [python3, agent.py]}\n'),
      ),
    );
  });

  it('loads the retention config', () => {
    const file = join(dir, 'retention.yaml');
    writeFileSync(file, yamlBlocks.find((b) => /^runs:/m.test(b)) as string);
    expect(loadConfig({ file, env: {} }).runs.retention).toBeDefined();
  });

  it('creates a run on a server with the curl example', async () => {
    const port = await freePort();
    let server: ServerProcess | undefined;
    try {
      server = await startServer(['--data-dir', data, '--listen', `127.0.0.1:${port}`]);
      const curl = RUNS_MD.match(/```sh\n(curl -sS -X POST[\s\S]*?)```/)?.[1] as string;
      expect(curl).toBeDefined();
      const r = spawnSync('bash', ['-c', `set -euo pipefail\n${localized(curl)}`], {
        encoding: 'utf8',
        env: {
          ...process.env,
          TOUCHSTONE_SERVER: `http://127.0.0.1:${port}`,
          TOUCHSTONE_API_KEY: 'unused-without-auth',
        },
      });
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({
        name: 'nightly',
        project: 'support',
        status: expect.stringMatching(/^RUN_STATUS_/),
      });
    } finally {
      server?.proc.kill('SIGKILL');
    }
  });
});
