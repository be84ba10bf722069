import { createHash } from 'node:crypto';
import { type AuditLogger, audited, authorize, type Principal } from '../auth/index.js';
import { CoreErrors, type EvalRecord } from '../core/index.js';
import { DatasetErrors } from './error-codes.js';
import { DATASET_LIMITS, type DatasetLimits } from './limits.js';
import { DATASET_FORMATS, type DatasetFormat, normalizeDataset, sniffFormat } from './normalize.js';
import {
  checkIncomingKey,
  datasetKeyParts,
  datasetMetaPath,
  datasetPath,
  NAME_PATTERN,
  PROJECT_PATTERN,
  parseDatasetPath,
} from './paths.js';
import type { DatasetRoot, StoredObject } from './root.js';

/** What an upload or import answers; `path` is what a run spec's `dataset.path` takes. */
export interface DatasetUploadResult {
  path: string;
  records: number;
  sha256: string;
}

/** A published dataset as `GET /v1alpha1/datasets` lists it. */
export interface DatasetView {
  name: string;
  /** What a run spec's `dataset.path` takes. */
  path: string;
  sha256: string;
  /** Absent for a dataset published before record counts were kept. */
  records?: number;
  /** Size of the normalized JSON Lines. */
  bytes: number;
  /** RFC 3339: when this content was last uploaded. */
  uploadedAt: string;
}

/** What is kept beside a published dataset (`meta/<project>/<name>/<sha256>.json`). */
interface DatasetMeta {
  records: number;
}

const PROJECT_RULE =
  'project names are 1–63 lowercase letters, digits, _ . - starting with a letter or digit';

/** Keys read from the root per listing call while a page fills. */
const LIST_BATCH = 1000;
/** Details read at once while a page is answered. */
const META_READS = 8;

function encodeCursor(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url');
}

/** A page token's key; it must lie under the listed prefix. */
function decodeCursor(token: string, prefix: string): string {
  const key = Buffer.from(token, 'base64url').toString('utf8');
  if (!key.startsWith(prefix) || key.length > 1024) {
    throw DatasetErrors.DATASET_INVALID_REQUEST('invalid page_token: not one this list returned', {
      details: [{ path: 'page_token', message: 'not a token of this list' }],
    });
  }
  return key;
}

/** `fn` over `items` with at most `limit` calls at once; results in order. */
async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** The dataset named by an upload or import request. */
export interface DatasetRequest {
  project?: string | undefined;
  name: string;
  /** `jsonl` or `parquet`; absent or empty = inferred. */
  format?: string | undefined;
}

/** A page of a dataset version's records, with the version and how many records it has. */
export interface DatasetRecordsPage {
  path: string;
  total: number;
  records: EvalRecord[];
  nextPageToken?: string;
}

/** A request checked against the caller's permission: the project settled, name and format valid. */
export interface DatasetTarget {
  project: string;
  name: string;
  format: DatasetFormat | undefined;
}

/** One of the replica's conversion slots, held from before the data arrives until the answer. */
export interface ConversionSlot {
  /** Gives the slot back. Safe twice. */
  release(): void;
}

export interface DatasetServiceDeps {
  root: DatasetRoot;
  logger: AuditLogger;
  limits?: Partial<DatasetLimits>;
}

/** Seconds a refused conversion is told to wait: a full-size conversion takes about that. */
const CAPACITY_RETRY_AFTER_SECONDS = 2;

/**
 * Dataset upload, import and reading. Uploads and imports are normalized to JSON Lines of
 * Records and published under the root at `datasets/<project>/<name>/<sha256>.jsonl`, so the same
 * content always gets the same path and a run names exactly the data it read. At most
 * `conversionSlots` conversions run at once on a replica; more are refused as retryable.
 */
export class DatasetService {
  readonly limits: DatasetLimits;
  private busy = 0;

  constructor(private readonly deps: DatasetServiceDeps) {
    this.limits = { ...DATASET_LIMITS, ...deps.limits };
  }

  /** The root's location, for messages and the CLI. */
  get location(): string {
    return this.deps.root.location;
  }

  /**
   * Checks the caller may write datasets of the project (permission `datasets.write`) and that
   * the name and format are valid. Cheap: streams call it on their first message.
   */
  target(caller: Principal, request: DatasetRequest): DatasetTarget {
    const details: { path: string; message: string }[] = [];
    const project = request.project === '' ? undefined : request.project;
    if (project !== undefined && !PROJECT_PATTERN.test(project)) {
      details.push({
        path: 'project',
        message: PROJECT_RULE,
      });
    }
    if (!NAME_PATTERN.test(request.name)) {
      details.push({
        path: 'name',
        message:
          'dataset names are 1–128 lowercase letters, digits, _ . - starting with a letter or digit',
      });
    }
    const format = request.format === '' ? undefined : request.format;
    if (format !== undefined && !(DATASET_FORMATS as readonly string[]).includes(format)) {
      details.push({ path: 'format', message: 'expected jsonl or parquet' });
    }
    if (details.length > 0) {
      throw DatasetErrors.DATASET_INVALID_REQUEST(
        `invalid dataset request: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`,
        { details },
      );
    }
    return {
      project: authorize(caller, 'datasets.write', project),
      name: request.name,
      format: format as DatasetFormat | undefined,
    };
  }

  /** Takes a conversion slot, or throws DATASET_CAPACITY_EXHAUSTED (retryable, Retry-After). */
  reserve(): ConversionSlot {
    if (this.busy >= this.limits.conversionSlots) {
      throw DatasetErrors.DATASET_CAPACITY_EXHAUSTED(
        `all ${this.limits.conversionSlots} dataset conversion slots of this server are busy; retry in ${CAPACITY_RETRY_AFTER_SECONDS} s`,
        { retryAfterSeconds: CAPACITY_RETRY_AFTER_SECONDS },
      );
    }
    this.busy++;
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.busy--;
      },
    };
  }

  /**
   * Normalizes `body` and publishes it (the caller holds a slot from `reserve`). Nothing is
   * written unless every row converted; the write itself is atomic.
   */
  async publish(
    caller: Principal,
    target: DatasetTarget,
    body: Uint8Array,
    action = 'datasets.upload',
  ): Promise<DatasetUploadResult> {
    return audited(
      this.deps.logger,
      caller,
      action,
      target.project,
      { dataset: target.name },
      async () => {
        const format = target.format ?? sniffFormat(body);
        const normalized = await normalizeDataset(body, format, this.limits);
        const path = datasetPath(target.project, target.name, normalized.sha256);
        // The details first: the dataset itself is the commit point (a listing shows a dataset
        // only when it exists; details without one are rewritten by the next upload).
        const meta: DatasetMeta = { records: normalized.records };
        await this.deps.root.put(
          datasetMetaPath(path),
          Buffer.from(JSON.stringify(meta)),
          'application/json',
        );
        await this.deps.root.put(path, normalized.bytes, 'application/jsonl');
        return { path, records: normalized.records, sha256: normalized.sha256 };
      },
    );
  }

  /** `target`, `reserve` and `publish` in one call, for a body already in memory. */
  async upload(
    caller: Principal,
    request: DatasetRequest,
    body: Uint8Array,
  ): Promise<DatasetUploadResult> {
    const target = this.target(caller, request);
    const slot = this.reserve();
    try {
      return await this.publish(caller, target, body);
    } finally {
      slot.release();
    }
  }

  /**
   * Imports an object already under the root's `incoming/<project>/` prefix: read, normalized
   * and published exactly as an upload. The object stays where it is.
   */
  async import(
    caller: Principal,
    request: DatasetRequest & { uri: string },
  ): Promise<DatasetUploadResult> {
    const target = this.target(caller, request);
    const key = this.deps.root.relativeKey(request.uri);
    if (key === undefined) {
      throw DatasetErrors.DATASET_URI_REFUSED(
        `the import uri is not under the dataset root ${this.deps.root.location}; put the object under incoming/${target.project}/ there`,
        { details: [{ path: 'uri', message: `not under ${this.deps.root.location}` }] },
      );
    }
    checkIncomingKey(key, target.project);
    const slot = this.reserve();
    try {
      const body = await this.deps.root.get(key, {
        maxBytes: this.limits.maxUploadBytes,
        within: `incoming/${target.project}/`,
      });
      if (body === undefined) {
        throw DatasetErrors.DATASET_NOT_FOUND(
          `no object ${key} under the dataset root ${this.deps.root.location}`,
        );
      }
      const format = target.format ?? formatFromKey(key);
      return await this.publish(caller, { ...target, format }, body, 'datasets.import');
    } finally {
      slot.release();
    }
  }

  /**
   * A project's published datasets by path (name, then content hash), each with its record count
   * (absent for datasets published before counts were kept). Needs `datasets.read`.
   */
  async list(
    caller: Principal,
    project: string | undefined,
    page: { pageSize: number; pageToken?: string | undefined },
  ): Promise<{ items: DatasetView[]; nextPageToken?: string }> {
    if (project !== undefined && !PROJECT_PATTERN.test(project)) {
      throw DatasetErrors.DATASET_INVALID_REQUEST('invalid dataset request: project', {
        details: [{ path: 'project', message: PROJECT_RULE }],
      });
    }
    const owner = authorize(caller, 'datasets.read', project);
    const prefix = `datasets/${owner}/`;
    let cursor = page.pageToken === undefined ? undefined : decodeCursor(page.pageToken, prefix);
    const found: StoredObject[] = [];
    let more = true;
    while (more && found.length < page.pageSize) {
      const batch = await this.deps.root.list(prefix, { after: cursor, limit: LIST_BATCH });
      more = batch.truncated;
      for (const [i, object] of batch.objects.entries()) {
        cursor = object.key;
        if (datasetKeyParts(object.key)?.project === owner) found.push(object);
        if (found.length === page.pageSize) {
          more ||= i < batch.objects.length - 1;
          break;
        }
      }
    }
    const items = await mapLimited(found, META_READS, (o) => this.view(owner, o));
    const last = found.at(-1);
    return {
      items,
      ...(more && last !== undefined ? { nextPageToken: encodeCursor(last.key) } : {}),
    };
  }

  private async view(project: string, object: StoredObject): Promise<DatasetView> {
    const parts = datasetKeyParts(object.key) as { name: string; sha256: string };
    const meta = await this.deps.root.get(datasetMetaPath(object.key), {
      maxBytes: 64 * 1024,
      within: `meta/${project}/`,
    });
    let records: number | undefined;
    try {
      const parsed =
        meta === undefined ? undefined : (JSON.parse(meta.toString('utf8')) as DatasetMeta);
      if (Number.isInteger(parsed?.records)) records = parsed?.records;
    } catch {
      // Unreadable details: the count is unknown, the dataset is still listed.
    }
    return {
      name: parts.name,
      path: object.key,
      sha256: parts.sha256,
      ...(records === undefined ? {} : { records }),
      bytes: object.bytes,
      uploadedAt: object.modifiedAt,
    };
  }

  /**
   * The records of a published dataset, for runs (which have authorized the caller already).
   * Refuses a path of another project or not of the published form; checks the content still
   * has the SHA-256 its path names.
   */
  async read(project: string, path: string): Promise<readonly EvalRecord[]> {
    const parts = parseDatasetPath(path, project);
    const body = await this.deps.root.get(path, {
      maxBytes: this.limits.maxNormalizedBytes,
      within: `datasets/${project}/`,
    });
    if (body === undefined) {
      throw DatasetErrors.DATASET_NOT_FOUND(
        `no dataset ${path} under the dataset root; upload it first (the path an upload returns)`,
        { details: [{ path: 'dataset.path', message: 'no such dataset' }] },
      );
    }
    if (createHash('sha256').update(body).digest('hex') !== parts.sha256) {
      throw DatasetErrors.DATASET_CORRUPT(
        `dataset ${path} no longer has the content its path names; upload it again`,
      );
    }
    const records: EvalRecord[] = [];
    let start = 0;
    while (start < body.length) {
      let end = body.indexOf(0x0a, start);
      if (end < 0) end = body.length;
      if (end > start) records.push(JSON.parse(body.toString('utf8', start, end)) as EvalRecord);
      start = end + 1;
    }
    return records;
  }

  /**
   * A page of one version's records (`sha256`; the newest version when absent), for previews.
   * The token is the offset of the next record.
   */
  async records(
    caller: Principal,
    request: { project?: string | undefined; name: string; sha256?: string | undefined },
    page: { pageSize: number; pageToken?: string | undefined },
  ): Promise<DatasetRecordsPage> {
    const p = authorize(caller, 'datasets.read', request.project);
    if (!NAME_PATTERN.test(request.name) || !/^([0-9a-f]{64})?$/.test(request.sha256 ?? '')) {
      throw DatasetErrors.DATASET_NOT_FOUND(`no dataset "${request.name}" in project "${p}"`);
    }
    let path: string;
    if (request.sha256 === undefined || request.sha256 === '') {
      const newest = await this.newestVersion(p, request.name);
      if (newest === undefined) {
        throw DatasetErrors.DATASET_NOT_FOUND(`no dataset "${request.name}" in project "${p}"`);
      }
      path = newest.key;
    } else {
      path = datasetPath(p, request.name, request.sha256);
    }
    const offset = decodeOffset(page.pageToken);
    const all = await this.read(p, path);
    const end = Math.min(all.length, offset + page.pageSize);
    return {
      path,
      total: all.length,
      records: all.slice(offset, end),
      ...(end < all.length
        ? { nextPageToken: Buffer.from(String(end)).toString('base64url') }
        : {}),
    };
  }

  /** The last uploaded content of a dataset (its versions are the objects under its name). */
  private async newestVersion(project: string, name: string): Promise<StoredObject | undefined> {
    let newest: StoredObject | undefined;
    let after: string | undefined;
    for (;;) {
      const batch = await this.deps.root.list(`datasets/${project}/${name}/`, {
        after,
        limit: LIST_BATCH,
      });
      for (const object of batch.objects) {
        if (datasetKeyParts(object.key)?.name !== name) continue;
        if (newest === undefined || object.modifiedAt > newest.modifiedAt) newest = object;
      }
      after = batch.objects.at(-1)?.key;
      if (!batch.truncated || after === undefined) return newest;
    }
  }

  close(): Promise<void> {
    return this.deps.root.close();
  }
}

function decodeOffset(token: string | undefined): number {
  if (token === undefined || token === '') return 0;
  const text = Buffer.from(token, 'base64url').toString('utf8');
  if (!/^\d{1,9}$/.test(text)) {
    throw CoreErrors.INVALID_ARGUMENT('page_token is not a token this server issued', {
      details: [{ path: 'page_token', message: 'malformed page token' }],
    });
  }
  return Number(text);
}

/** The format an import key's extension names; undefined = sniffed from the content. */
function formatFromKey(key: string): DatasetFormat | undefined {
  const lower = key.toLowerCase();
  if (lower.endsWith('.parquet') || lower.endsWith('.pq')) return 'parquet';
  if (lower.endsWith('.jsonl') || lower.endsWith('.ndjson') || lower.endsWith('.json')) {
    return 'jsonl';
  }
  return undefined;
}
