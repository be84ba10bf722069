import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, freePort, type ServerProcess, startServer } from '../../test/support/process.js';

/**
 * A resource with many problems, through the real CLI: every problem is printed, each on its own
 * line and once, locally and from a server's answer.
 */

const POLICY = `apiVersion: touchstone.dev/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: Bad_Name}
spec:
  selector: "error &&"
  sampling: {rate: 2}
  stages:
    - evaluators: [{ref: nope}, {ref: exact-match}, {ref: exact-match}]
  alerts: [{metric: exact-mach, below: 0.5}]
`;

const RUN = `name: Bad Name
dataset: {records: [{input: a, outptu: b}]}
evaluators: [{ref: nope}, {ref: exact-match}]
trials: 0
gates: ["exact-mach >= 0.5", "garbage"]
`;

/** Lines of stderr that name a field (`  path: message`). */
const detailLines = (stderr: string) => stderr.split('\n').filter((l) => /^ {2}\S+: /.test(l));

// Each CLI process takes seconds on a loaded machine.
describe('validation errors in the CLI', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-validation-'));
  const policy = join(dir, 'policy.yaml');
  const run = join(dir, 'run.yaml');
  let server: ServerProcess;
  let listen: string;

  beforeAll(async () => {
    writeFileSync(policy, POLICY);
    writeFileSync(run, RUN);
    listen = `127.0.0.1:${await freePort()}`;
    server = await startServer(['--data-dir', join(dir, 'server'), '--listen', listen]);
  });
  afterAll(() => {
    server?.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const expectOnce = (stderr: string, headline: string, paths: string[]) => {
    const lines = detailLines(stderr);
    expect(lines.map((l) => l.trim().split(': ')[0])).toEqual(paths);
    expect(new Set(lines).size).toBe(lines.length);
    expect(stderr.split(headline).length - 1).toBe(1);
    // The one-line summary the error also carries is not printed beside the list.
    for (const line of lines) expect(stderr.split(line.trim()).length - 1).toBe(1);
  };

  it('prints every problem of a policy once, locally and from a server', () => {
    const paths = [
      'spec.selector',
      'metadata.name',
      'spec.sampling.rate',
      'spec.stages[0].evaluators[0].ref',
      'spec.stages[0].evaluators[2].name',
      'spec.alerts[0].metric',
    ];
    const local = cli(['policy', 'apply', '-f', policy, '--dry-run', '--data-dir', join(dir, 'l')]);
    expect(local.code).toBe(2);
    expectOnce(local.stderr, 'invalid policy', paths);
    const remote = cli(['policy', 'apply', '-f', policy, '--dry-run', '--server', listen]);
    expect(remote.code).toBe(2);
    expect(remote.stderr).toMatch(/^touchstone: POLICY_CEL_INVALID: invalid policy\n/);
    expectOnce(remote.stderr, 'invalid policy', paths);
  });

  it('prints every problem of a run spec once, locally and from a server', () => {
    const paths = [
      'name',
      'dataset.records[0].outptu',
      'trials',
      'evaluators[0].ref',
      'gates[0]',
      'gates[1]',
    ];
    const local = cli(['run', '-f', run, '--data-dir', join(dir, 'l')]);
    expect(local.code).toBe(2);
    expectOnce(local.stderr, 'invalid run spec', paths);
    const remote = cli(['run', '-f', run, '--server', listen]);
    expect(remote.code).toBe(2);
    expectOnce(remote.stderr, 'invalid run spec', paths);
  });
});
