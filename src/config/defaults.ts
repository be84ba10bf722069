/** Every default the spec and the design name, in one place. */
export const DEFAULTS = {
  listen: '127.0.0.1:4318',
  dataDir: './.touchstone',
  shutdownTimeout: '10s',
  store: { poolSize: 10 },
  limits: {
    maxBodyBytes: 16 * 1024 * 1024,
    maxEvaluateRecords: 10_000,
    maxInflightWriteRequests: 32,
    maxInflightWriteBytes: 32 * 1024 * 1024,
    requestTimeout: '60s',
  },
  traces: {
    completionGrace: '2s',
    idleTimeout: '30s',
    maxAge: '5m',
    maxAttributeBytes: 64 * 1024,
  },
  online: {
    concurrency: 8,
    batchSize: 64,
    visibilityTimeout: '60s',
    pollInterval: '250ms',
  },
  webhooks: {
    maxAttempts: 6,
    timeout: '10s',
    retention: '168h',
  },
  sources: {
    /** `sources.dir` is `<data_dir>/<dirName>` unless set. */
    dirName: 'secrets',
    maxRecordsPerSecond: 200,
  },
  datasets: {
    /** `datasets.root` is `<data_dir>/<dirName>` unless set. */
    dirName: 'datasets',
    s3Region: 'us-east-1',
  },
  runs: {
    retention: '2160h',
    maxConcurrent: 2,
    leaseTimeout: '30s',
  },
  judge: {
    maxConcurrency: 4,
    requestsPerSecond: 10,
    timeout: '60s',
    maxRetries: 3,
  },
} as const;
