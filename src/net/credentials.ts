import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { globMatch, isTouchstoneError } from '../core/index.js';
import { CredentialErrors } from './error-codes.js';
import { compileHostPatterns, type HostPatterns } from './outbound-guard.js';

/** Names the environment variable that holds a secret; the secret itself never sits in config. */
export interface EnvCredentialRef {
  env: string;
}

/** Names a key of a mounted secret: the file `<sources.dir>/<secret>/<key>`. */
export interface FileCredentialRef {
  /** `<secret>/<key>`. */
  file: string;
}

/**
 * A credential reference as resources write it: exactly one of `env` or `file`.
 * (`CredentialRef` was env-only before file references existed; judges still take env only.)
 */
export type CredentialRef = EnvCredentialRef | FileCredentialRef;

/** One `credentials.grants` entry of the server config. */
export interface CredentialGrant {
  /** The variable name, or `file:<secret>/<key>` for a file credential. */
  env: string;
  /** Projects that may use it: names, or patterns with `*` (`*` alone = every project). */
  projects: readonly string[];
  /** Endpoint hosts it may be sent to (`allow_hosts` syntax); empty or absent = any host. */
  hosts?: readonly string[];
}

/**
 * Looks a credential up in the environment handed in by the composition root (only `main.ts`
 * reads `process.env`). Resolved per use, so a rotated secret takes effect without a rebuild.
 * Surrounding whitespace is dropped (secrets pasted from files often end in a newline); an unset
 * or blank variable is `undefined`, so callers can refuse instead of sending an empty token.
 */
export function resolveCredential(
  ref: EnvCredentialRef,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (!Object.hasOwn(env, ref.env)) return undefined;
  const value = env[ref.env]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** One path segment of a file reference: no separators, no `.`/`..`, nothing hidden by `..`. */
const SEGMENT = /^(?!\.\.?$)(?!\.\.)[A-Za-z0-9._-]{1,253}$/;
/** Secrets are small; a bigger file is a misconfiguration, not a credential to send. */
const MAX_FILE_BYTES = 64 * 1024;

/** `env FOO` or `file secret/key`: how errors and logs name a credential (never its value). */
export function describeCredential(ref: CredentialRef): string {
  return 'env' in ref ? `env ${ref.env}` : `file ${ref.file}`;
}

/** The `credentials.grants[].env` value that grants this reference. */
export function credentialGrantKey(ref: CredentialRef): string {
  return 'env' in ref ? ref.env : `file:${ref.file}`;
}

/** Throws CREDENTIAL_INVALID_REF unless the reference is well formed; returns the file segments. */
function checkRef(ref: CredentialRef): [string, string] | undefined {
  const hasEnv = typeof (ref as { env?: unknown }).env === 'string';
  const hasFile = typeof (ref as { file?: unknown }).file === 'string';
  if (hasEnv === hasFile) {
    throw CredentialErrors.CREDENTIAL_INVALID_REF(
      'a credential reference names exactly one of env or file',
    );
  }
  if ('env' in ref) {
    if (!ENV_NAME.test(ref.env)) {
      throw CredentialErrors.CREDENTIAL_INVALID_REF(
        'credential env must be an environment variable name (letters, digits, _)',
      );
    }
    return undefined;
  }
  const parts = ref.file.split('/');
  const [secret, key] = parts;
  if (
    parts.length !== 2 ||
    secret === undefined ||
    key === undefined ||
    !SEGMENT.test(secret) ||
    !SEGMENT.test(key)
  ) {
    throw CredentialErrors.CREDENTIAL_INVALID_REF(
      'credential file must be written <secret>/<key>: letters, digits, . _ - in each part, no "." or ".." parts',
    );
  }
  return [secret, key];
}

/**
 * Project patterns: exact names, or `*` matching any run of characters (the config schema allows
 * no other wildcard). Matched by `globMatch`, not a regular expression: `*a*a*…` translated to
 * `.*a.*a.*…` backtracks exponentially.
 */
function projectMatcher(patterns: readonly string[]): (project: string) => boolean {
  const exact = new Set<string>();
  const globs: string[] = [];
  for (const p of patterns) {
    if (p.includes('*')) globs.push(p);
    else exact.add(p);
  }
  return (project) => exact.has(project) || globs.some((g) => globMatch(g, project));
}

export interface CredentialResolverOptions {
  /** The process environment, handed in by the composition root. */
  env: Readonly<Record<string, string | undefined>>;
  /** `sources.dir`: where `file: <secret>/<key>` references are read from. */
  dir: string;
  /** `credentials.grants`. Host patterns are compiled here; a malformed one throws. */
  grants: readonly CredentialGrant[];
}

export interface CredentialResolver {
  /**
   * The credential's value, read now: from the environment, or from `<dir>/<secret>/<key>` (read
   * afresh at every call, so a rotated secret applies without a restart). Surrounding whitespace,
   * such as a trailing newline, is dropped. Throws CREDENTIAL_INVALID_REF for a malformed
   * reference (including path traversal) and CREDENTIAL_UNREADABLE when there is no value; neither
   * error carries the value or the file's content.
   */
  resolve(ref: CredentialRef): Promise<string>;
  /**
   * Throws CREDENTIAL_NOT_GRANTED unless a `credentials.grants` entry names this credential for
   * the project and lets it go to `host` (the endpoint's host name). Run at apply, in dry run and
   * before each use; the message names the credential, project and host, never a value.
   */
  checkGrant(ref: CredentialRef, project: string, host: string): void;
  /** `checkGrant`, then `resolve`. */
  resolveGranted(ref: CredentialRef, project: string, host: string): Promise<string>;
}

interface CompiledGrant {
  key: string;
  projects: (project: string) => boolean;
  hosts: HostPatterns | undefined;
}

/** Builds the resolver the server uses for `credentials: {env}` and `{file}` references. */
export function createCredentialResolver(options: CredentialResolverOptions): CredentialResolver {
  const grants: CompiledGrant[] = options.grants.map((g, i) => ({
    key: g.env,
    projects: projectMatcher(g.projects),
    hosts:
      g.hosts === undefined || g.hosts.length === 0
        ? undefined
        : compileHostPatterns(g.hosts, `credentials.grants[${i}].hosts`),
  }));

  function unreadable(ref: CredentialRef, why: string) {
    return CredentialErrors.CREDENTIAL_UNREADABLE(`credential ${describeCredential(ref)} ${why}`);
  }

  async function readSecretFile(ref: CredentialRef, path: string): Promise<string> {
    let handle: Awaited<ReturnType<typeof open>> | undefined;
    try {
      handle = await open(path, 'r');
      const stat = await handle.stat();
      if (!stat.isFile()) throw unreadable(ref, `is not a file under sources.dir (${path})`);
      if (stat.size > MAX_FILE_BYTES) {
        throw unreadable(ref, `is larger than ${MAX_FILE_BYTES} bytes (${path})`);
      }
      return await handle.readFile('utf8');
    } catch (err) {
      if (isTouchstoneError(err)) throw err;
      const code = (err as { code?: unknown }).code;
      // Only the code: an fs message names the path at most, but keep errors to what we chose.
      throw code === 'ENOENT'
        ? unreadable(ref, `does not exist under sources.dir (${path})`)
        : unreadable(
            ref,
            `cannot be read from sources.dir (${path}: ${typeof code === 'string' ? code : 'error'})`,
          );
    } finally {
      await handle?.close().catch(() => {});
    }
  }

  async function resolve(ref: CredentialRef): Promise<string> {
    const segments = checkRef(ref);
    if (segments === undefined) {
      const name = (ref as EnvCredentialRef).env;
      const value = resolveCredential({ env: name }, options.env);
      if (value === undefined)
        throw unreadable(ref, `names the variable ${name}, which is unset or blank`);
      return value;
    }
    const value = (await readSecretFile(ref, join(options.dir, ...segments))).trim();
    if (value === '') throw unreadable(ref, 'is an empty file');
    return value;
  }

  function checkGrant(ref: CredentialRef, project: string, host: string): void {
    checkRef(ref);
    const key = credentialGrantKey(ref);
    const named = grants.filter((g) => g.key === key);
    const what = `credential ${describeCredential(ref)}`;
    const entry = `{env: ${JSON.stringify(key)}, projects: [${JSON.stringify(project)}], hosts: [${JSON.stringify(host)}]}`;
    if (named.length === 0) {
      throw CredentialErrors.CREDENTIAL_NOT_GRANTED(
        `${what} is not granted to any project; add ${entry} to credentials.grants`,
      );
    }
    const forProject = named.filter((g) => g.projects(project));
    if (forProject.length === 0) {
      throw CredentialErrors.CREDENTIAL_NOT_GRANTED(
        `${what} is not granted to project ${JSON.stringify(project)}; add ${entry} to credentials.grants`,
      );
    }
    if (!forProject.some((g) => g.hosts === undefined || g.hosts.matchesHost(host))) {
      throw CredentialErrors.CREDENTIAL_NOT_GRANTED(
        `${what} is granted to project ${JSON.stringify(project)} but not for host ${host}; list the host in that grant's hosts`,
      );
    }
  }

  return {
    resolve,
    checkGrant,
    async resolveGranted(ref, project, host) {
      checkGrant(ref, project, host);
      return resolve(ref);
    },
  };
}
