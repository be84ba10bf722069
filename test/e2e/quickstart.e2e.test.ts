import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  cliOnTerminal,
  entryIn,
  freePort,
  type ServerProcess,
  startServer,
} from '../support/process.js';

/**
 * README's quickstart as a newcomer runs it: every shell block of the section, in order, copied
 * as written into one bash script (`set -euo pipefail`), plus the complete commands its prose
 * gives inline, beside a real server started in the same directory. Two things differ from a
 * terminal: `npx touchstone` runs the CLI from source (a function stands in for npx, so the test
 * does not rebuild dist/), and the port is a free one instead of 4318.
 */

const ROOT = resolve('.');

/** The Quickstart section's ```sh blocks, their list indentation removed, in order. */
function quickstartBlocks(readme: string): string[] {
  const section = readme.slice(readme.indexOf('## Quickstart'), readme.indexOf('## Configuration'));
  return [...section.matchAll(/^( *)```sh\n([\s\S]*?)^\1```$/gm)].map(([, indent, body]) =>
    (body as string)
      .split('\n')
      .map((line) => line.slice(Math.min((indent as string).length, line.search(/\S|$/))))
      .join('\n'),
  );
}

/** Complete commands the prose gives inline (`npx touchstone …`, `curl …`), placeholders aside. */
function inlineCommands(readme: string): string[] {
  const section = readme.slice(readme.indexOf('## Quickstart'), readme.indexOf('## Configuration'));
  const prose = section.replace(/^ *```[\s\S]*?^ *```$/gm, '');
  return [...prose.matchAll(/`((?:npx touchstone|curl) [^`]+)`/g)]
    .map((m) => m[1] as string)
    .filter((command) => !/\b[A-Z]{3,}\b/.test(command.replace(/\bTOUCHSTONE_\w+/g, '')));
}

const MARK = '::quickstart step';

describe('README quickstart, copy-paste, start to end', { timeout: 600_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-quickstart-'));
  const readme = readFileSync('README.md', 'utf8');
  let server: ServerProcess;
  let port: number;
  let run: { code: number | null; steps: string[]; stderr: string };

  beforeAll(async () => {
    symlinkSync(join(ROOT, 'examples'), join(dir, 'examples'));
    port = await freePort();
    server = await startServer(['--listen', `127.0.0.1:${port}`], {}, dir);
    const entry = entryIn(dir).join(' ');
    const steps = [
      ...quickstartBlocks(readme),
      ...inlineCommands(readme).map((command) => `${command}\n`),
    ];
    const script = [
      'set -euo pipefail',
      `npx() { if [ "$1" = touchstone ]; then shift; "${process.execPath}" ${entry} "$@"; else command npx "$@"; fi; }`,
      // The marker starts a line of its own even after output without a final newline.
      ...steps.map((step, i) => `printf '\\n%s\\n' "${MARK} ${i + 1}"\n${step}`),
    ]
      .join('\n')
      .replaceAll('127.0.0.1:4318', `127.0.0.1:${port}`);
    const env: Record<string, string | undefined> = { ...process.env };
    for (const name of Object.keys(env)) {
      if (name.startsWith('OTEL_') || name === 'TOUCHSTONE_SERVER') delete env[name];
    }
    const r = spawnSync('bash', ['-c', script], {
      cwd: dir,
      encoding: 'utf8',
      env,
      timeout: 540_000,
    });
    run = {
      code: r.status,
      steps: r.stdout.split(new RegExp(`^${MARK} \\d+$`, 'm')).slice(1),
      stderr: r.stderr,
    };
  }, 600_000);
  afterAll(() => {
    server?.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs every step without an error', () => {
    expect(run.code, `${run.stderr}\n${server.output().slice(-2000)}`).toBe(0);
    expect(run.steps).toHaveLength(quickstartBlocks(readme).length + inlineCommands(readme).length);
    expect(quickstartBlocks(readme)).toHaveLength(6);
  });

  it('1–3: evaluates over REST and the CLI, lists evaluators, creates a key', () => {
    const [curl, cliEvaluate, key] = run.steps;
    expect(curl).toContain('"outcome":"OUTCOME_SCORED"');
    expect(cliEvaluate).toMatch(/json-valid\s+SCORED/);
    expect(cliEvaluate).toContain('exact-match (cheap; needs output, reference)');
    expect(key).toMatch(/created key key_\S+ \(project demo, roles admin\)/);
  });

  it('4: the demo agent sends three traces, one failing, that the CLI lists and shows', () => {
    const traces = run.steps[3] as string;
    expect(traces).toContain('sent 3 traces');
    expect(traces).toContain('waiting until the server has completed them… done');
    expect(traces.match(/demo-travel-agent\s+invoke_agent travel-helper/g)).toHaveLength(3);
    // Piped, `traces get` prints the JSON it always did: the failed trace, its tool error.
    const json = traces.slice(traces.indexOf('{\n'));
    const shown = JSON.parse(json) as {
      trace: { error: boolean };
      record: { trajectory: { type: string; name: string; error: string }[] };
    };
    expect(shown.trace.error).toBe(true);
    expect(shown.record.trajectory.find((s) => s.type === 'tool')).toMatchObject({
      name: 'search_hotels',
      error: expect.stringContaining('timed out'),
    });
  });

  it('4: on a terminal (or with --tree) the trace is a tree of steps', () => {
    const ids = cli(['traces', 'list', '--error', '-q'], {}, dir);
    expect(ids.code, ids.stderr).toBe(0);
    const id = ids.stdout.trim().split('\n')[0] as string;
    const terminal = cliOnTerminal(['traces', 'get', id], {}, dir);
    expect(terminal.code, terminal.output).toBe(0);
    const tree = terminal.output.replaceAll('\r\n', '\n');
    expect(tree).toContain('trajectory:\n└─ agent     travel-helper');
    expect(tree).toMatch(/├─ tool {6}search_hotels {2}5\.000s {2}ERROR hotel search timed out/);
    expect(tree).toContain('in:  {"city":"Rome","nights":2,"from":"saturday"}');
    const piped = cli(['traces', 'get', id, '--tree'], {}, dir);
    expect(piped.stdout).toContain('trajectory:\n└─ agent     travel-helper');
    // `--json` on a terminal: the JSON (after the note naming the data dir).
    expect(cliOnTerminal(['traces', 'get', id, '--json'], {}, dir).output).toMatch(
      /^\{\r?\n {2}"trace": \{/m,
    );
    // `-o json`, the kubectl spelling, is the same.
    expect(cliOnTerminal(['traces', 'get', id, '-o', 'json'], {}, dir).output).toMatch(
      /^\{\r?\n {2}"trace": \{/m,
    );
    expect(cli(['traces', 'get', id, '--tree', '--json'], {}, dir).code).toBe(2);
    expect(cli(['traces', 'get', id, '-o', 'yaml'], {}, dir).stderr).toMatch(/json, text/);
  });

  it('5: the policy scores the traces that arrive after it; rescore queues the earlier ones', () => {
    const policy = run.steps[4] as string;
    expect(policy).toContain('created: policy agent-health');
    expect(policy).toMatch(/waiting for the policies to score them… [1-3] of 3 scored/);
    expect(policy).toMatch(/agent-health/);
    const rescore = run.steps.find((s) => s.includes('queued'));
    expect(rescore).toMatch(/queued [1-9]\d* trace\(s\) started since 2026-01-01T00:00:00\.000Z/);
  });

  it('6: the offline run succeeds with its gates', () => {
    const report = run.steps[5] as string;
    expect(report).toMatch(/run run_\S+ "quickstart" \(project default\): SUCCEEDED/);
    expect(report).toContain('✓ exact-match >= 0.6 (value 0.667)');
  });

  it('7 and the rest of the prose: metrics, datasets', () => {
    expect(run.steps.some((s) => s.includes('touchstone_http_requests_total'))).toBe(true);
    expect(run.steps.some((s) => /^NAME\s+RECORDS\s+BYTES\s+UPLOADED\s+PATH$/m.test(s))).toBe(true);
  });
});
