import type { DatasetRoot, StoredObject } from './root.js';
import type { S3Client } from './s3-client.js';

/** Parses `s3://bucket/prefix` (prefix optional, no trailing slash kept). */
export function parseS3Root(root: string): { bucket: string; prefix: string } | undefined {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(root);
  if (m === null) return undefined;
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '');
  if (prefix.split('/').some((s) => s === '.' || s === '..') || /\/\//.test(prefix)) {
    return undefined;
  }
  return { bucket: m[1] as string, prefix };
}

/**
 * A dataset root in an S3-compatible bucket (`s3://bucket/prefix`). A dataset is uploaded with
 * one PutObject of the finished file, only after the whole conversion succeeded: an object
 * appears whole or not at all, so a failed upload leaves nothing at the final key.
 */
export class S3DatasetRoot implements DatasetRoot {
  readonly location: string;

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly prefix: string,
    private readonly onClose: () => Promise<void> = async () => {},
  ) {
    this.location = `s3://${bucket}${prefix === '' ? '' : `/${prefix}`}`;
  }

  private objectKey(key: string): string {
    return this.prefix === '' ? key : `${this.prefix}/${key}`;
  }

  relativeKey(uri: string): string | undefined {
    if (!/^[a-z][a-z0-9+.-]*:/i.test(uri)) return uri.startsWith('/') ? undefined : uri;
    const head = `s3://${this.bucket}/${this.prefix === '' ? '' : `${this.prefix}/`}`;
    if (!uri.startsWith(head) || uri.length === head.length) return undefined;
    return uri.slice(head.length);
  }

  put(key: string, bytes: Uint8Array, contentType: string): Promise<void> {
    return this.client.putObject(this.objectKey(key), bytes, contentType);
  }

  get(key: string, options: { maxBytes: number }): Promise<Buffer | undefined> {
    return this.client.getObject(this.objectKey(key), options.maxBytes);
  }

  async list(
    prefix: string,
    options: { after?: string | undefined; limit: number },
  ): Promise<{ objects: StoredObject[]; truncated: boolean }> {
    const page = await this.client.listObjects(
      this.objectKey(prefix),
      options.after === undefined ? undefined : this.objectKey(options.after),
      Math.min(options.limit, 1000),
    );
    const strip = this.prefix === '' ? 0 : this.prefix.length + 1;
    return {
      objects: page.objects.map((o) => ({ ...o, key: o.key.slice(strip) })),
      truncated: page.truncated,
    };
  }

  close(): Promise<void> {
    return this.onClose();
  }
}
