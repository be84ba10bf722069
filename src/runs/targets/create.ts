import { stat } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { type ErrorDetail, isTouchstoneError, systemClock } from '../../core/index.js';
import { CredentialErrors, NetErrors } from '../../net/index.js';
import { commandBackend } from './command.js';
import type { Target, TargetDeps, TargetOutput } from './contract.js';
import { TargetErrors } from './error-codes.js';
import { type Backend, harnessTarget } from './harness.js';
import { httpBackend } from './http.js';
import { openAiBackend } from './openai.js';
import { targetGuard } from './outbound.js';
import {
  DEFAULT_CALL_TIMEOUT_MS,
  type Environment,
  type Harness,
  type TargetSpec,
} from './schema.js';

const DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

/** The host a command target's variables are granted for: the machine running it. */
export const COMMAND_GRANT_HOST = 'localhost';

/** Every `{env}` the target sends, with the host it goes to and where the spec names it. */
function credentialUses(
  spec: TargetSpec,
  environment: Environment,
): { env: string; host: string; path: string }[] {
  switch (spec.kind) {
    case 'openai-compatible':
      return spec.apiKeyEnv === undefined
        ? []
        : [{ env: spec.apiKeyEnv, host: new URL(spec.baseUrl).hostname, path: 'target.apiKeyEnv' }];
    case 'http':
      return Object.entries(spec.headers).flatMap(([name, value]) =>
        typeof value === 'string'
          ? []
          : [{ env: value.env, host: new URL(spec.url).hostname, path: `target.headers.${name}` }],
      );
    case 'command':
      return environment.env.map((env, i) => ({
        env,
        host: COMMAND_GRANT_HOST,
        path: `environment.env[${i}]`,
      }));
  }
}

/** `environment.workingDirectory`, else the spec file's folder (so `argv: [./agent]` works). */
function workingDirectory(environment: Environment, deps: TargetDeps): string | undefined {
  const dir = environment.workingDirectory;
  if (dir === undefined) return deps.baseDir;
  if (isAbsolute(dir)) return dir;
  return deps.baseDir === undefined ? undefined : resolve(deps.baseDir, dir);
}

/**
 * The checks that decide whether a target may run here, made before anything runs (at create and
 * again when an executor builds the target): command targets allowed, every variable granted to
 * the project for the host it goes to, the URL's host not refused by the outbound rules (without
 * DNS; the connection is checked again), the working directory present. Throws the first kind of
 * problem found with every instance of it in `details`.
 */
export async function preflightTarget(
  spec: TargetSpec | undefined,
  environment: Environment,
  deps: TargetDeps,
): Promise<void> {
  if (spec === undefined) return;
  if (spec.kind === 'command' && deps.allowCommand !== true) {
    throw TargetErrors.TARGET_COMMAND_DISABLED(
      'command targets are not allowed here: run this spec with `touchstone run -f` without --server',
      { details: [{ path: 'target.kind', message: 'command targets are not allowed here' }] },
    );
  }
  if (deps.grants !== 'all') {
    const grants = deps.grants;
    const refused: ErrorDetail[] = [];
    let first: unknown;
    for (const use of credentialUses(spec, environment)) {
      try {
        grants.checkGrant({ env: use.env }, deps.project, use.host);
      } catch (err) {
        if (!isTouchstoneError(err)) throw err;
        first ??= err;
        refused.push({ path: use.path, message: err.message });
      }
    }
    if (first !== undefined && isTouchstoneError(first)) {
      throw CredentialErrors.CREDENTIAL_NOT_GRANTED(first.message, { details: refused });
    }
  }
  if (spec.kind === 'command') {
    if (environment.workingDirectory !== undefined) {
      const dir = workingDirectory(environment, deps);
      const problem =
        dir === undefined
          ? 'must be an absolute path when the run has no spec file to resolve it against'
          : await stat(dir).then(
              (s) => (s.isDirectory() ? undefined : 'is not a directory'),
              () => 'does not exist',
            );
      if (problem !== undefined) {
        throw TargetErrors.TARGET_COMMAND_NOT_FOUND(`environment.workingDirectory ${problem}`, {
          details: [{ path: 'environment.workingDirectory', message: problem }],
        });
      }
    }
    return;
  }
  const url = new URL(spec.kind === 'http' ? spec.url : spec.baseUrl);
  try {
    await targetGuard(url, deps).checkTarget(url);
  } catch (err) {
    if (!isTouchstoneError(err) || err.code !== NetErrors.OUTBOUND_TARGET_REFUSED.code) throw err;
    const path = spec.kind === 'http' ? 'target.url' : 'target.baseUrl';
    throw NetErrors.OUTBOUND_TARGET_REFUSED(err.message, {
      details: [{ path, message: err.message }],
      cause: err,
    });
  }
}

/** The target of a spec without one: the dataset's own outputs, evaluated as they are. */
function datasetOutputs(): Target {
  return {
    kind: 'none',
    concurrency: 64,
    async generate({ record }): Promise<TargetOutput> {
      return {
        output: record.output,
        ...(record.trajectory === undefined ? {} : { trajectory: record.trajectory as never }),
        ...(record.usage === undefined ? {} : { usage: record.usage }),
      };
    },
    async close() {},
  };
}

/**
 * Builds the target of a run: the spec's kind wrapped in its harness, with a call deadline of the
 * target's `timeout` or `environment.timeout`. Runs `preflightTarget` first, so a target that may
 * not run here is refused before the first record. `spec` undefined gives the dataset's outputs.
 */
export async function createTarget(
  spec: TargetSpec | undefined,
  harness: Harness,
  environment: Environment,
  deps: TargetDeps,
): Promise<Target> {
  if (spec === undefined) return datasetOutputs();
  await preflightTarget(spec, environment, deps);
  const clock = deps.clock ?? systemClock;
  const now = () => clock.now();
  const maxBytes = deps.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const timeoutMs = spec.timeout ?? environment.timeout ?? DEFAULT_CALL_TIMEOUT_MS;
  let backend: Backend;
  switch (spec.kind) {
    case 'openai-compatible':
      backend = openAiBackend(spec, deps, maxBytes, now);
      break;
    case 'http':
      backend = httpBackend(spec, deps, maxBytes, now);
      break;
    case 'command': {
      const env: Record<string, string> = {};
      const path = deps.env.PATH;
      if (path !== undefined) env.PATH = path;
      const secrets: string[] = [];
      for (const name of environment.env) {
        const value = deps.env[name];
        if (value === undefined) continue;
        env[name] = value;
        secrets.push(value);
      }
      backend = commandBackend(
        spec,
        {
          env,
          cwd: workingDirectory(environment, deps),
          maxBytes,
          secrets,
        },
        now,
      );
      break;
    }
  }
  return harnessTarget(backend, harness, timeoutMs, now);
}
