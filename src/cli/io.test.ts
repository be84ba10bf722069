import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CliExit, readResources } from './io.js';
import { readSpec } from './run.js';

/** `-f` files of `apply` and `run`: hostile YAML is a usage error naming the file, at once. */

const dir = mkdtempSync(join(tmpdir(), 'touchstone-cli-io-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function exitOf(fn: () => unknown): CliExit {
  try {
    fn();
  } catch (err) {
    if (err instanceof CliExit) return err;
    throw err;
  }
  throw new Error('expected a CliExit');
}

const noStdin = () => '';

const laughs = () => {
  const lines = ['l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
  for (let i = 1; i <= 12; i++) lines.push(`l${i}: &l${i} [${Array(9).fill(`*l${i - 1}`)}]`);
  return lines.join('\n');
};

describe('CLI -f files', () => {
  it('a resource file with an alias bomb exits 2 naming the file and the problem', () => {
    const path = file('policy.yaml', `kind: OnlineEvalPolicy\n---\n${laughs()}\n`);
    const started = performance.now();
    const err = exitOf(() => readResources(path, noStdin));
    expect(performance.now() - started).toBeLessThan(2000);
    expect(err.code).toBe(2);
    expect(err.message).toBe(`${path} is not YAML or JSON: more than 100 aliases`);
  });

  it('a run spec with a merge bomb exits 2', () => {
    const lines = ['%YAML 1.1', '---', 'm0: &m0 {a: 1, b: 2}'];
    for (let i = 1; i <= 30; i++) lines.push(`m${i}: &m${i}\n  <<: [*m${i - 1}, *m${i - 1}]`);
    const err = exitOf(() => readSpec(file('run.yaml', lines.join('\n')), noStdin));
    expect(err.code).toBe(2);
    expect(err.message).toMatch(/run\.yaml is not YAML or JSON: (more than 100 aliases|an alias)/);
  });

  it('a syntax error names the document, line and kind, not the text', () => {
    const path = file('bad.yaml', 'kind: Webhook\n---\nsecret: "tsk_do-not-print\n');
    const err = exitOf(() => readResources(path, noStdin));
    expect(err.message).toMatch(/is not YAML or JSON: document 2, line \d+, column \d+: [a-z ]+$/);
    expect(err.message).not.toContain('tsk_');
  });
});
