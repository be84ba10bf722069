import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/** Every file under a directory, as paths relative to it. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory()
      ? files(path).map((f) => join(name, f))
      : [relative(dir, path)];
  });
}

describe('generated RPC code', () => {
  const out = mkdtempSync(join(tmpdir(), 'touchstone-buf-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it.each([
    ['buf.gen.yaml', join('src', 'api', 'rpc', 'gen')],
    ['buf.gen.ext-proc.yaml', join('src', 'guardrails', 'ext-proc', 'gen')],
  ])(
    '%s: %s is what `npx buf generate` makes from proto/ (regenerate after a change)',
    (template, committed) => {
      const bin = join(process.cwd(), 'node_modules', '.bin');
      const run = spawnSync(join(bin, 'buf'), ['generate', '--template', template, '-o', out], {
        encoding: 'utf8',
        env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` },
        timeout: 60_000,
      });
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      const generated = join(out, committed);
      expect(files(committed).sort()).toEqual(files(generated).sort());
      for (const file of files(generated)) {
        expect(readFileSync(join(committed, file), 'utf8'), file).toBe(
          readFileSync(join(generated, file), 'utf8'),
        );
      }
    },
  );
});
