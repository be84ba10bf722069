import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isTouchstoneError, withoutTrailingSlashes } from '../core/index.js';
import { DatasetErrors } from './error-codes.js';
import type { DatasetRoot, StoredObject } from './root.js';

function fsCode(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : 'error';
}

/**
 * A dataset root in a local directory (the default, `<data_dir>/datasets`). Publishing writes a
 * temporary file beside the final name, flushes it and renames it into place, so a reader never
 * sees a partial dataset and a failure leaves nothing under the final name.
 */
export class LocalDatasetRoot implements DatasetRoot {
  readonly location: string;

  constructor(dir: string) {
    this.location = resolve(dir);
  }

  relativeKey(uri: string): string | undefined {
    if (uri.startsWith('file:')) {
      let file: string;
      try {
        file = fileURLToPath(uri);
      } catch {
        return undefined;
      }
      const rel = relative(this.location, file);
      if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return undefined;
      return rel.split(sep).join('/');
    }
    // Another scheme (s3://, https://) is not this root.
    if (/^[a-z][a-z0-9+.-]*:/i.test(uri) || uri.startsWith('/')) return undefined;
    return uri;
  }

  private file(key: string): string {
    return join(this.location, ...key.split('/'));
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    const target = this.file(key);
    const temp = `${target}.tmp-${randomBytes(6).toString('hex')}`;
    try {
      await mkdir(dirname(target), { recursive: true });
      const handle = await open(temp, 'wx', 0o640);
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, target);
    } catch (err) {
      await rm(temp, { force: true }).catch(() => {});
      throw DatasetErrors.DATASET_STORAGE_FAILED(
        `writing the dataset under ${this.location} failed (${fsCode(err)})`,
      );
    }
  }

  async get(
    key: string,
    options: { maxBytes: number; within: string },
  ): Promise<Buffer | undefined> {
    const file = this.file(key);
    let real: string;
    try {
      real = await realpath(file);
    } catch (err) {
      if (fsCode(err) === 'ENOENT' || fsCode(err) === 'ENOTDIR') return undefined;
      throw DatasetErrors.DATASET_STORAGE_FAILED(
        `reading ${key} under ${this.location} failed (${fsCode(err)})`,
      );
    }
    // A symbolic link must not lead out of the prefix the caller may read (another project).
    const base = await realpath(this.location).catch(() => this.location);
    const allowed = join(base, ...options.within.split('/').filter((s) => s !== ''));
    if (!(real === allowed || real.startsWith(allowed + sep))) {
      throw DatasetErrors.DATASET_URI_REFUSED(
        `${key} resolves outside ${options.within} under the dataset root (a symbolic link)`,
      );
    }
    try {
      const handle = await open(real, 'r');
      try {
        const stat = await handle.stat();
        if (!stat.isFile()) return undefined;
        if (stat.size > options.maxBytes) {
          throw DatasetErrors.DATASET_TOO_LARGE(
            `${key} has ${stat.size} bytes; the limit is ${options.maxBytes} bytes`,
          );
        }
        return await handle.readFile();
      } finally {
        await handle.close();
      }
    } catch (err) {
      if (isTouchstoneError(err)) throw err;
      if (fsCode(err) === 'ENOENT') return undefined;
      throw DatasetErrors.DATASET_STORAGE_FAILED(
        `reading ${key} under ${this.location} failed (${fsCode(err)})`,
      );
    }
  }

  async list(prefix: string, limit: number): Promise<StoredObject[]> {
    const dir = this.file(withoutTrailingSlashes(prefix));
    let names: string[];
    try {
      names = (await readdir(dir, { recursive: true })).sort();
    } catch (err) {
      if (fsCode(err) === 'ENOENT' || fsCode(err) === 'ENOTDIR') return [];
      throw DatasetErrors.DATASET_STORAGE_FAILED(
        `listing ${prefix} under ${this.location} failed (${fsCode(err)})`,
      );
    }
    const out: StoredObject[] = [];
    for (const name of names) {
      if (out.length >= limit) break;
      // A write in progress (put's temporary file) is not an object yet.
      if (/\.tmp-[0-9a-f]+$/.test(name)) continue;
      const info = await stat(join(dir, name)).catch(() => undefined);
      if (info === undefined || !info.isFile()) continue;
      out.push({
        key: `${prefix}${name.split(sep).join('/')}`,
        bytes: info.size,
        modifiedAt: info.mtime.toISOString(),
      });
    }
    return out;
  }

  async close(): Promise<void> {}
}
