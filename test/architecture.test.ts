import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** The code of a file without its comments, so prose may name what code may not use. */
function code(file: string): string {
  return readFileSync(file, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, (comment) => comment.replace(/[^\n]/g, ''))
    .replace(/^\s*\/\/.*$/gm, '');
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return path.endsWith('.ts') && !/\.test(kit)?\.ts$/.test(path) ? [path] : [];
  });
}

describe('architecture rules that the import checker cannot see', () => {
  const files = sources('src');

  it('only main.ts reads process.env (config receives the environment as an argument)', () => {
    const offenders = files.filter(
      (f) => f !== join('src', 'main.ts') && /process\.env\b/.test(code(f)),
    );
    expect(offenders).toEqual([]);
  });

  it('only main.ts calls process.exit', () => {
    const offenders = files.filter(
      (f) => f !== join('src', 'main.ts') && /process\.exit\(/.test(code(f)),
    );
    expect(offenders).toEqual([]);
  });

  it('every area has an index.ts with a @module comment', () => {
    const areas = readdirSync('src').filter((n) => statSync(join('src', n)).isDirectory());
    for (const area of areas) {
      expect(readFileSync(join('src', area, 'index.ts'), 'utf8'), area).toMatch(/@module/);
    }
  });

  it('file names are kebab-case', () => {
    // Generated protobuf code (src/api/rpc/gen, src/guardrails/ext-proc/gen) keeps
    // protoc-gen-es's `<file>_pb.ts` names.
    const bad = files.filter(
      (f) =>
        !f.startsWith(join('src', 'api', 'rpc', 'gen')) &&
        !f.startsWith(join('src', 'guardrails', 'ext-proc', 'gen')) &&
        !/^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+)*\.ts$/.test(f.split('/').pop() ?? ''),
    );
    expect(bad).toEqual([]);
  });

  it('error codes are named through their catalogue constant, never spelled as a string', () => {
    // docs/errors.md lists every declared code (docs-sync.test.ts keeps it exact).
    const catalogue = new Set(
      [...readFileSync('docs/errors.md', 'utf8').matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map(
        (m) => m[1],
      ),
    );
    expect(catalogue.size).toBeGreaterThan(100);
    const offenders = files.flatMap((f) =>
      code(f)
        .split('\n')
        .flatMap((line, i) =>
          // A store's own error code may share a name with one of ours (MLflow's NOT_FOUND): a
          // comparison with the `errorCode` of a store's answer does not name our catalogue.
          [...(/\berrorCode\b/.test(line) ? [] : line.matchAll(/['"`]([A-Z][A-Z0-9_]+)['"`]/g))]
            .filter((m) => catalogue.has(m[1] ?? ''))
            .map((m) => `${f}:${i + 1} ${m[0]}`),
        ),
    );
    expect(offenders).toEqual([]);
  });

  it('one table maps error kinds to HTTP statuses and gRPC codes (api/errors.ts)', () => {
    const offenders = files.filter(
      (f) => f !== join('src', 'api', 'errors.ts') && /Record<\s*ErrorKind\s*,/.test(code(f)),
    );
    expect(offenders).toEqual([]);
  });

  it('areas learn their state words from the area that owns them, never from the store', () => {
    const words = /\b(RunStatus|SourcePhase|DeliveryState)\b/;
    const offenders = files.filter(
      (f) =>
        !f.startsWith(join('src', 'store')) &&
        [...code(f).matchAll(/import[^;]*?\{([^}]*)\}\s*from\s*'[./]*store\/index\.js'/g)].some(
          (m) => words.test(m[1] ?? ''),
        ),
    );
    expect(offenders).toEqual([]);
  });
});
