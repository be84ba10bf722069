import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * The container image definition, checked statically: no image builder can run on the test
 * machines (no container daemon, and no registry to pull the base image from), so these are the
 * Dockerfile rules that matter here, and then BuildKit's own linter (test/k8s/dockerfile-lint,
 * built by .ci/run) over the file.
 */

/** BuildKit's Dockerfile linter, built from test/k8s/dockerfile-lint. */
const LINT = process.env.TOUCHSTONE_DOCKERFILE_LINT ?? '';
const lintMissing =
  LINT === '' || !existsSync(LINT)
    ? 'no dockerfile-lint: build it with `bash -c "source .ci/run && setup_dockerfile_lint"` and export the TOUCHSTONE_DOCKERFILE_LINT it prints'
    : undefined;
if (lintMissing !== undefined)
  console.warn(`dockerfile.test.ts: linter tests skipped: ${lintMissing}`);

function lint(file: string): { status: number | null; out: string } {
  const res = spawnSync(LINT, [file], { encoding: 'utf8' });
  return { status: res.status, out: `${res.stdout}${res.stderr}` };
}

interface Instruction {
  op: string;
  args: string;
  line: number;
}

/** Instructions with continuation lines joined and comments dropped. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trimEnd();
    if (pending === undefined && (line.trim() === '' || line.trimStart().startsWith('#'))) return;
    const joined = pending === undefined ? line : `${pending.text} ${line.trim()}`;
    const start = pending?.line ?? i + 1;
    if (joined.endsWith('\\')) {
      pending = { text: joined.slice(0, -1), line: start };
      return;
    }
    pending = undefined;
    const [op = '', ...rest] = joined.trim().split(/\s+/);
    out.push({ op: op.toUpperCase(), args: rest.join(' '), line: start });
  });
  return out;
}

interface Stage {
  from: string;
  name?: string;
  body: Instruction[];
}

function stages(all: Instruction[]): Stage[] {
  const out: Stage[] = [];
  for (const ins of all) {
    if (ins.op === 'FROM') {
      const [from = '', as, name] = ins.args.split(/\s+/);
      out.push({ from, ...(as?.toUpperCase() === 'AS' && name ? { name } : {}), body: [] });
    } else out.at(-1)?.body.push(ins);
  }
  return out;
}

const text = readFileSync('Dockerfile', 'utf8');
const all = instructions(text);
const built = stages(all);
const final = built.at(-1) as Stage;

/** Build arguments declared before the first FROM, with their defaults. */
const globalArgs = new Map(
  all
    .slice(
      0,
      all.findIndex((i) => i.op === 'FROM'),
    )
    .filter((i) => i.op === 'ARG')
    .map((i) => {
      const [name = '', value = ''] = i.args.split('=');
      return [name, value];
    }),
);

function resolve(image: string): string {
  return image.replace(/\$\{?(\w+)\}?/g, (_, name: string) => globalArgs.get(name) ?? '');
}

describe('Dockerfile', () => {
  it('is multi-stage: a build stage, and a runtime stage that copies only its results', () => {
    expect(built.length).toBeGreaterThanOrEqual(2);
    const copies = final.body.filter((i) => i.op === 'COPY' && i.args.includes('--from='));
    expect(copies.map((i) => i.args)).toContainEqual(expect.stringContaining('/app/dist'));
    expect(copies.map((i) => i.args)).toContainEqual(expect.stringContaining('/app/node_modules'));
  });

  it('pins every base image to an exact Node.js LTS release of the slim Debian image', () => {
    for (const stage of built) {
      if (built.some((s) => s.name === stage.from)) continue;
      const image = resolve(stage.from);
      expect(image, stage.from).toMatch(
        /^node:(22|24)\.\d+\.\d+-[a-z]+-slim(@sha256:[0-9a-f]{64})?$/,
      );
    }
  });

  it('builds the native modules in the build stage, with no compiler in the runtime image', () => {
    const buildStage = built[0] as Stage;
    const run = (s: Stage) =>
      s.body
        .filter((i) => i.op === 'RUN')
        .map((i) => i.args)
        .join('\n');
    expect(run(buildStage)).toMatch(/apt-get install[^\n]*\bg\+\+/);
    expect(run(buildStage)).toContain('npm rebuild re2');
    expect(run(buildStage)).toContain('npm prune --omit=dev');
    expect(run(final)).not.toMatch(/apt-get install|g\+\+|npm (ci|install)/);
  });

  it('runs as a non-root user, with the data directory a volume and a health check', () => {
    const users = final.body.filter((i) => i.op === 'USER');
    expect(users.at(-1)?.args).toMatch(/^[1-9]\d*(:[1-9]\d*)?$/);
    expect(final.body.find((i) => i.op === 'VOLUME')?.args).toContain('/var/lib/touchstone');
    const health = final.body.find((i) => i.op === 'HEALTHCHECK');
    expect(health?.args).toContain('/healthz');
    expect(final.body.find((i) => i.op === 'ENTRYPOINT')?.args).toMatch(/^\[/);
  });

  it('fetches nothing from URLs and adds no files by ADD', () => {
    expect(all.filter((i) => i.op === 'ADD')).toEqual([]);
    for (const i of all.filter((x) => x.op === 'RUN')) {
      expect(i.args, `line ${i.line}`).not.toMatch(/\b(curl|wget)\b/);
    }
  });

  it('has a .dockerignore that admits exactly what the build copies from the context', () => {
    const ignore = readFileSync('.dockerignore', 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignore[0]).toBe('**');
    const admitted = ignore
      .filter((l) => l.startsWith('!'))
      .map((l) => l.slice(1).replace(/\/$/, ''));
    const sources = all
      .filter((i) => i.op === 'COPY' && !i.args.includes('--from='))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1))
      .map((s) => s.replace(/^\.\//, '').replace(/\/$/, ''));
    for (const source of sources) {
      expect(
        admitted.some((a) => source === a || source.startsWith(`${a}/`)),
        `${source} is excluded by .dockerignore`,
      ).toBe(true);
    }
  });

  it('uses the port, user and data directory the Helm chart expects', () => {
    const values = parse(readFileSync('deploy/helm/touchstone/values.yaml', 'utf8'));
    expect(final.body.find((i) => i.op === 'EXPOSE')?.args).toBe(String(values.server.port));
    expect(final.body.filter((i) => i.op === 'USER').at(-1)?.args).toBe(
      `${values.server.podSecurityContext.runAsUser}:${values.server.podSecurityContext.runAsGroup}`,
    );
    const config = parse(readFileSync('deploy/docker/config.yaml', 'utf8'));
    expect(config.listen).toBe(`0.0.0.0:${values.server.port}`);
    expect(config.data_dir).toBe('/var/lib/touchstone');
  });
});

describe.skipIf(lintMissing !== undefined)("BuildKit's Dockerfile linter", () => {
  it('finds nothing to say about the Dockerfile', () => {
    expect(lint('Dockerfile')).toEqual({ status: 0, out: '' });
  });

  it('does check: a Dockerfile breaking its rules gets a warning per rule, and exit 1', () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-dockerfile-'));
    try {
      const file = join(dir, 'Dockerfile');
      writeFileSync(file, 'FROM node:24-slim as Build\nMAINTAINER someone\nENV a b\n');
      const { status, out } = lint(file);
      expect(status).toBe(1);
      for (const rule of ['StageNameCasing', 'FromAsCasing', 'MaintainerDeprecated']) {
        expect(out).toContain(rule);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
