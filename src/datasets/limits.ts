/** The dataset limits the spec names (Limits: "Dataset upload"), in one place. */
export const DATASET_LIMITS = {
  /** Largest upload (request body, stream data or imported object), in bytes. */
  maxUploadBytes: 64 * 1024 * 1024,
  /** Largest normalized dataset (JSON Lines of Records), in bytes; for Parquet also the sum of its decompressed pages. */
  maxNormalizedBytes: 64 * 1024 * 1024,
  maxRecords: 100_000,
  /** Longest JSON Lines row, in bytes (without its newline). */
  maxRowBytes: 4 * 1024 * 1024,
  /** Largest Parquet page, compressed or uncompressed, in bytes. */
  maxPageBytes: 4 * 1024 * 1024,
  /** UploadDataset stream: one config message and at most 100000 data messages. */
  maxStreamMessages: 100_001,
  /** Conversions running at once on one replica. */
  conversionSlots: 2,
} as const;

export type DatasetLimits = { -readonly [K in keyof typeof DATASET_LIMITS]: number };
