import { defineErrors } from '../core/index.js';

/**
 * Errors of dataset upload, import and reading. Messages name the row (JSONL line or Parquet row),
 * the field and the problem, never a value from the file: datasets hold user content.
 */
export const DatasetErrors = defineErrors({
  DATASET_INVALID_REQUEST: {
    kind: 'invalid_argument',
    doc: 'The upload, import or list request is malformed: the dataset name, project, format or page token is invalid (`details` names the field).',
  },
  DATASET_FORMAT_INVALID: {
    kind: 'invalid_argument',
    doc: 'The file is not readable as the given format: not UTF-8 JSON Lines, or not a Parquet file (bad magic, footer or page); nothing was published.',
  },
  DATASET_ROW_INVALID: {
    kind: 'invalid_argument',
    doc: 'A row is not a Record object (not an object, unknown field, wrong type, invalid value); the message names the JSONL line or Parquet row and the field, never the value. The whole upload is rejected and nothing is published.',
  },
  DATASET_ID_DUPLICATE: {
    kind: 'invalid_argument',
    doc: 'Two rows have the same record id (rows without an id are numbered by position); the message names both rows. Nothing was published.',
  },
  DATASET_EMPTY: {
    kind: 'invalid_argument',
    doc: 'The file holds no records; nothing was published.',
  },
  DATASET_TOO_LARGE: {
    kind: 'payload_too_large',
    doc: 'The upload, the imported object or the normalized dataset exceeds 64 MiB (for Parquet, also its decompressed pages); split the dataset.',
  },
  DATASET_TOO_MANY_RECORDS: {
    kind: 'payload_too_large',
    doc: 'The dataset has more than 100000 records; split it.',
  },
  DATASET_ROW_TOO_LARGE: {
    kind: 'payload_too_large',
    doc: 'A JSON Lines row is longer than 4 MiB; the message names the line.',
  },
  DATASET_PAGE_TOO_LARGE: {
    kind: 'payload_too_large',
    doc: 'A Parquet page is larger than 4 MiB (compressed or uncompressed); write the file with smaller pages or row groups.',
  },
  DATASET_STREAM_TOO_LONG: {
    kind: 'payload_too_large',
    doc: 'An UploadDataset stream sent more than 100001 messages (one config and at most 100000 data chunks); send larger chunks.',
  },
  DATASET_CAPACITY_EXHAUSTED: {
    kind: 'resource_exhausted',
    retryable: true,
    doc: 'Both dataset conversion slots of this replica are busy; retry after `Retry-After` seconds (with the same Idempotency-Key).',
  },
  DATASET_URI_REFUSED: {
    kind: 'invalid_argument',
    doc: "An import URI is not under the dataset root's `incoming/<project>/` prefix of the caller's project (or is malformed, or climbs out with `..`).",
  },
  DATASET_PATH_INVALID: {
    kind: 'invalid_argument',
    doc: 'A dataset path is not one an upload returned (`datasets/<project>/<name>/<sha256>.jsonl`) or names another project.',
  },
  DATASET_NOT_FOUND: {
    kind: 'not_found',
    doc: 'No dataset or import object at that path under the dataset root.',
  },
  DATASET_CORRUPT: {
    kind: 'internal',
    doc: 'A stored dataset no longer matches the SHA-256 in its path (changed in the bucket or on disk); upload it again.',
  },
  DATASET_STORAGE_FAILED: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The dataset root (local directory or S3-compatible bucket) could not be read or written; the message names the operation and the status; retry later or fix the root configuration.',
  },
  DATASET_STORAGE_REFUSED: {
    kind: 'failed_precondition',
    doc: 'The S3-compatible bucket refused the request (access denied, no such bucket, bad credentials); fix `datasets.s3` or the bucket policy.',
  },
});
