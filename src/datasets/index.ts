/**
 * @module datasets
 * Datasets of offline runs: upload and import of JSON Lines and Parquet files, their
 * normalization to Records (field mapping, limits, whole-file rejection naming the row), the
 * conversion slots, publication under the dataset root (a local directory or an S3-compatible
 * bucket reached through net/ with SigV4), and the reader runs use (`read(project, path)`).
 * Imports core, auth, config types and net; never api/, and no store (datasets are files).
 */
import { resolve } from 'node:path';
import type { AuditLogger } from '../auth/index.js';
import type { Config } from '../config/index.js';
import { type Clock, systemClock } from '../core/index.js';
import {
  createCredentialResolver,
  createHttpClient,
  createOutboundGuard,
  type ProxySettings,
} from '../net/index.js';
import { DatasetErrors } from './error-codes.js';
import { DATASET_LIMITS } from './limits.js';
import { LocalDatasetRoot } from './local-root.js';
import type { DatasetRoot } from './root.js';
import { S3Client } from './s3-client.js';
import { parseS3Root, S3DatasetRoot } from './s3-root.js';
import { DatasetService } from './service.js';

export { DatasetErrors } from './error-codes.js';
export { DATASET_LIMITS, type DatasetLimits } from './limits.js';
export { LocalDatasetRoot } from './local-root.js';
export {
  DATASET_FORMATS,
  type DatasetFormat,
  type NormalizedDataset,
  normalizeDataset,
} from './normalize.js';
export { datasetPath } from './paths.js';
export type { DatasetRoot, StoredObject } from './root.js';
export { FIELD_ALIASES } from './rows.js';
export { S3Client, type S3ClientOptions, type S3Credentials } from './s3-client.js';
export { parseS3Root, S3DatasetRoot } from './s3-root.js';
export {
  type ConversionSlot,
  type DatasetRecordsPage,
  type DatasetRequest,
  DatasetService,
  type DatasetServiceDeps,
  type DatasetTarget,
  type DatasetUploadResult,
  type DatasetView,
} from './service.js';

export interface DatasetServiceOptions {
  /** The process environment, for `{env: VAR}` credential references of an S3 root. */
  env: Record<string, string | undefined>;
  logger: AuditLogger;
  clock?: Clock;
  proxy?: ProxySettings;
}

/**
 * The dataset root `datasets.root` names. An S3 root gets its own HTTP client whose guard allows
 * the configured endpoint's host (the operator named it, as with judges); every other target,
 * and every redirect, is still refused.
 */
export function createDatasetRoot(
  config: Readonly<Config>,
  options: Omit<DatasetServiceOptions, 'logger'>,
): DatasetRoot {
  const root = config.datasets.root ?? resolve(config.data_dir, 'datasets');
  if (!root.startsWith('s3://')) return new LocalDatasetRoot(root);
  const parsed = parseS3Root(root);
  const s3 = config.datasets.s3;
  if (parsed === undefined || s3 === undefined) {
    throw DatasetErrors.DATASET_STORAGE_REFUSED(
      'datasets.root must be s3://<bucket>[/<prefix>] with datasets.s3 set',
    );
  }
  const endpoint = s3.endpoint ?? `https://s3.${s3.region}.amazonaws.com`;
  const host = new URL(endpoint).hostname;
  const guard = createOutboundGuard({
    allowHosts: s3.path_style ? [host] : [`${parsed.bucket}.${host}`],
    requireHttps: false,
    setting: 'datasets.s3.endpoint',
  });
  const http = createHttpClient({
    userAgent: 'touchstone-datasets',
    checkTarget: guard.checkTarget,
    wrapConnector: guard.wrapConnector,
    timeoutMs: 120_000,
    maxResponseBytes: DATASET_LIMITS.maxUploadBytes,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.proxy === undefined ? {} : { proxy: options.proxy }),
  });
  const credentials = createCredentialResolver({
    env: options.env,
    dir: config.sources.dir ?? resolve(config.data_dir, 'secrets'),
    grants: [],
  });
  const client = new S3Client({
    endpoint,
    region: s3.region,
    bucket: parsed.bucket,
    pathStyle: s3.path_style,
    http,
    clock: options.clock ?? systemClock,
    credentials: async () => {
      const token =
        s3.session_token === undefined ? undefined : await credentials.resolve(s3.session_token);
      return {
        accessKeyId: await credentials.resolve(s3.access_key_id),
        secretAccessKey: await credentials.resolve(s3.secret_access_key),
        ...(token === undefined ? {} : { sessionToken: token }),
      };
    },
  });
  return new S3DatasetRoot(client, parsed.bucket, parsed.prefix, () => http.close());
}

/** The dataset service as configured (the server and the CLI's local mode build it). */
export function createDatasetService(
  config: Readonly<Config>,
  options: DatasetServiceOptions,
): DatasetService {
  return new DatasetService({ root: createDatasetRoot(config, options), logger: options.logger });
}
