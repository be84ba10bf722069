/** An object under the root as a listing shows it. */
export interface StoredObject {
  /** Relative to the root. */
  key: string;
  bytes: number;
  /** RFC 3339: when the object was last written. */
  modifiedAt: string;
}

/**
 * Where datasets are kept: a local directory or an S3-compatible bucket. Keys are
 * slash-separated and relative to the root; the service builds and checks them.
 */
export interface DatasetRoot {
  /** The root as configured (`/var/lib/touchstone/datasets`, `s3://bucket/prefix`), for messages. */
  readonly location: string;
  /**
   * The key, relative to the root, that an import URI names: the root-relative form
   * (`incoming/p/x.jsonl`) or this root's own URI form (`file://…` or `s3://bucket/prefix/…`);
   * undefined when the URI points outside the root.
   */
  relativeKey(uri: string): string | undefined;
  /**
   * Publishes `bytes` at `key` atomically: readers see the whole object or none; a failed put
   * leaves nothing at `key`.
   */
  put(key: string, bytes: Uint8Array, contentType: string): Promise<void>;
  /**
   * The object at `key`, or undefined when there is none. Throws DATASET_TOO_LARGE above
   * `maxBytes`. `within` is a key prefix the object must really lie under (a local root
   * resolves symbolic links before checking).
   */
  get(key: string, options: { maxBytes: number; within: string }): Promise<Buffer | undefined>;
  /**
   * Objects whose key starts with `prefix`, in key order, after the key `after` (exclusive), at
   * most `limit` of them; `truncated` when more follow.
   */
  list(
    prefix: string,
    options: { after?: string | undefined; limit: number },
  ): Promise<{ objects: StoredObject[]; truncated: boolean }>;
  /** Releases connections. Safe twice. */
  close(): Promise<void>;
}
