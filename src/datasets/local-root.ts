import { randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { mkdir, open, readdir, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isTouchstoneError } from '../core/index.js';
import { DatasetErrors } from './error-codes.js';
import type { DatasetRoot, StoredObject } from './root.js';

/** What `put` writes before renaming: never listed. */
const TEMP_FILE = /\.tmp-[0-9a-f]{12}$/;

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

  /** The keys of regular files under `dir` (symbolic links are not followed), unsorted. */
  private async keysUnder(dir: string, key: string, out: string[]): Promise<void> {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (fsCode(err) === 'ENOENT' || fsCode(err) === 'ENOTDIR') return;
      throw DatasetErrors.DATASET_STORAGE_FAILED(
        `listing ${key} under ${this.location} failed (${fsCode(err)})`,
      );
    }
    for (const entry of entries) {
      if (entry.isDirectory()) {
        await this.keysUnder(join(dir, entry.name), `${key}${entry.name}/`, out);
      } else if (entry.isFile() && !TEMP_FILE.test(entry.name)) {
        out.push(`${key}${entry.name}`);
      }
    }
  }

  async list(
    prefix: string,
    options: { after?: string | undefined; limit: number },
  ): Promise<{ objects: StoredObject[]; truncated: boolean }> {
    // Listings are by directory: the prefix is a folder (`datasets/<project>/`).
    const folder = prefix.endsWith('/') ? prefix : `${prefix}/`;
    const keys: string[] = [];
    await this.keysUnder(this.file(folder.slice(0, -1)), folder, keys);
    const after = options.after;
    const selected = keys
      .filter((k) => after === undefined || k > after)
      .sort()
      .slice(0, options.limit + 1);
    const objects: StoredObject[] = [];
    for (const key of selected.slice(0, options.limit)) {
      try {
        const info = await stat(this.file(key));
        objects.push({ key, bytes: info.size, modifiedAt: info.mtime.toISOString() });
      } catch (err) {
        // Replaced or removed since it was listed.
        if (fsCode(err) !== 'ENOENT') {
          throw DatasetErrors.DATASET_STORAGE_FAILED(
            `reading ${key} under ${this.location} failed (${fsCode(err)})`,
          );
        }
      }
    }
    return { objects, truncated: selected.length > options.limit };
  }

  async close(): Promise<void> {}
}
