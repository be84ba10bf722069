import { createHash } from 'node:crypto';
import { type AuditLogger, audited, authorize, type Principal } from '../auth/index.js';
import { CoreErrors, type EvalRecord } from '../core/index.js';
import { DatasetErrors } from './error-codes.js';
import { DATASET_LIMITS, type DatasetLimits } from './limits.js';
import { DATASET_FORMATS, type DatasetFormat, normalizeDataset, sniffFormat } from './normalize.js';
import {
  checkIncomingKey,
  datasetPath,
  NAME_PATTERN,
  PROJECT_PATTERN,
  parseDatasetPath,
} from './paths.js';
import type { DatasetRoot } from './root.js';

/** What an upload or import answers; `path` is what a run spec's `dataset.path` takes. */
export interface DatasetUploadResult {
  path: string;
  records: number;
  sha256: string;
}

/** The dataset named by an upload or import request. */
export interface DatasetRequest {
  project?: string | undefined;
  name: string;
  /** `jsonl` or `parquet`; absent or empty = inferred. */
  format?: string | undefined;
}

/** One published version of a dataset (newest first in a listing). */
export interface DatasetVersion {
  path: string;
  sha256: string;
  bytes: number;
  publishedAt: string;
}

/** A dataset name and its published versions. */
export interface DatasetView {
  name: string;
  versions: DatasetVersion[];
}

/** A page of a dataset version's records, with the version and how many records it has. */
export interface DatasetRecordsPage {
  path: string;
  total: number;
  records: EvalRecord[];
  nextPageToken?: string;
}

/** Objects a listing reads at most (versions of every dataset of a project). */
const LIST_LIMIT = 10_000;

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
        message:
          'project names are 1–63 lowercase letters, digits, _ . - starting with a letter or digit',
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

  /** The project's datasets by name, each with its versions newest first (`datasets.read`). */
  async list(caller: Principal, project: string | undefined): Promise<DatasetView[]> {
    const p = authorize(caller, 'datasets.read', project);
    const byName = new Map<string, DatasetVersion[]>();
    for (const object of await this.deps.root.list(`datasets/${p}/`, LIST_LIMIT)) {
      let parts: { name: string; sha256: string };
      try {
        parts = parseDatasetPath(object.key, p);
      } catch {
        continue;
      }
      const versions = byName.get(parts.name) ?? [];
      versions.push({
        path: object.key,
        sha256: parts.sha256,
        bytes: object.bytes,
        publishedAt: object.modifiedAt,
      });
      byName.set(parts.name, versions);
    }
    return [...byName.entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, versions]) => ({
        name,
        versions: versions.sort((a, b) => b.publishedAt.localeCompare(a.publishedAt)),
      }));
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
      const dataset = (await this.list(caller, p)).find((d) => d.name === request.name);
      const newest = dataset?.versions[0];
      if (newest === undefined) {
        throw DatasetErrors.DATASET_NOT_FOUND(`no dataset "${request.name}" in project "${p}"`);
      }
      path = newest.path;
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
