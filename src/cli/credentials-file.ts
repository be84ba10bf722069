import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { EXIT } from './exit-codes.js';
import { CliExit } from './io.js';

/**
 * The sign-ins of `touchstone login`, one per server URL, in the user's config directory:
 * `credentials.json`, readable by its owner only (file 0600, a new directory 0700), replaced whole
 * (written beside it, then renamed) so a crash never leaves half a file. A token is kept under
 * the server it was obtained for and only ever sent there.
 */

const SignInSchema = z.strictObject({
  issuer: z.string(),
  client_id: z.string(),
  id_token: z.string(),
  /** RFC 3339, from the token's `exp`. */
  expires_at: z.iso.datetime({ offset: true }),
  subject: z.string(),
  email: z.string().optional(),
});
export type StoredSignIn = z.infer<typeof SignInSchema>;

const FileSchema = z.strictObject({
  version: z.literal(1),
  servers: z.record(z.string(), SignInSchema),
});
type CredentialsFile = z.infer<typeof FileSchema>;

/**
 * The credentials file: in `TOUCHSTONE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/touchstone`, else
 * `%APPDATA%\touchstone` on Windows, else `~/.config/touchstone`.
 */
export function credentialsPath(
  env: Record<string, string | undefined>,
  platform: NodeJS.Platform = process.platform,
): string {
  const set = (name: string) => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };
  const dir =
    set('TOUCHSTONE_CONFIG_DIR') ??
    (set('XDG_CONFIG_HOME') === undefined
      ? undefined
      : join(env.XDG_CONFIG_HOME as string, 'touchstone')) ??
    (platform === 'win32' && set('APPDATA') !== undefined
      ? join(env.APPDATA as string, 'touchstone')
      : join(set('HOME') ?? homedir(), '.config', 'touchstone'));
  return join(dir, 'credentials.json');
}

function unreadable(path: string, why: string): CliExit {
  return new CliExit(
    EXIT.ERROR,
    `cannot read the sign-ins in ${path} (${why}); remove the file and run touchstone login`,
  );
}

function readFile(path: string): CredentialsFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { version: 1, servers: {} };
    throw unreadable(path, code ?? 'unreadable');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw unreadable(path, 'not JSON');
  }
  const result = FileSchema.safeParse(parsed);
  if (!result.success) throw unreadable(path, 'not the expected shape');
  return result.data;
}

/** The sign-in stored for `server`, if any. */
export function storedSignIn(path: string, server: string): StoredSignIn | undefined {
  return readFile(path).servers[server];
}

function writeFile(path: string, file: CredentialsFile): void {
  const dir = dirname(path);
  // A directory made here is 0700; one that exists (the user named it) keeps its mode, and the
  // file itself is 0600 either way.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temp = join(dir, `.credentials.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    writeFileSync(temp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    renameSync(temp, path);
  } catch (err) {
    rmSync(temp, { force: true });
    throw new CliExit(
      EXIT.ERROR,
      `cannot write ${path}: ${(err as NodeJS.ErrnoException).code ?? 'write failed'}`,
    );
  }
}

/** Stores (or replaces) the sign-in for `server`; other servers' sign-ins are kept. */
export function saveSignIn(path: string, server: string, signIn: StoredSignIn): void {
  const file = readFile(path);
  file.servers[server] = signIn;
  writeFile(path, file);
}

/** Forgets the sign-in for `server`; the file goes when it holds no other. False when none was. */
export function removeSignIn(path: string, server: string): boolean {
  const file = readFile(path);
  if (file.servers[server] === undefined) return false;
  delete file.servers[server];
  if (Object.keys(file.servers).length === 0) rmSync(path, { force: true });
  else writeFile(path, file);
  return true;
}
