/** Every default the spec and the design name, in one place. */
export const DEFAULTS = {
  listen: '127.0.0.1:4318',
  dataDir: './.touchstone',
  shutdownTimeout: '10s',
  store: { poolSize: 10 },
  /** `maxRules`: `auth.rules` are all evaluated on every call, so their number is capped. */
  auth: { oidcTimeout: '5s', maxRules: 64 },
  audit: { retention: '2160h' },
  /** Scopes the web UI asks the identity provider for (`ui.sign_in.scopes`). */
  ui: { signInScopes: ['openid', 'email', 'profile'] },
  limits: {
    maxBodyBytes: 16 * 1024 * 1024,
    maxEvaluateRecords: 10_000,
    maxInflightWriteRequests: 32,
    maxInflightWriteBytes: 32 * 1024 * 1024,
    requestTimeout: '60s',
    maxConnections: 4096,
  },
  traces: {
    completionGrace: '2s',
    idleTimeout: '30s',
    maxAge: '5m',
    maxAttributeBytes: 64 * 1024,
    ingestThreads: 0,
    /**
     * Counts are OpenTelemetry SDKs' defaults (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and its siblings,
     * 128 each); 1 KiB keeps every key and name a real instrumentation writes (Datadog's agent
     * cuts keys at 200 characters and operation names at 100; MLflow stores tag keys up to 250).
     */
    limits: {
      maxAttributeKeyBytes: 1024,
      maxNameBytes: 1024,
      maxAttributesPerSpan: 128,
      maxEventsPerSpan: 128,
      maxLinksPerSpan: 128,
      maxAttributesPerEvent: 128,
      maxAttributesPerLink: 128,
    },
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
    leaseTimeout: '2m',
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
  /** 64 MiB and 10 s per module by default; stdin matches the 4 MiB dataset row limit. */
  plugins: {
    reloadInterval: '5s',
    memoryMiB: 64,
    maxMemoryMiB: 256,
    timeout: '10s',
    maxTimeout: '60s',
    maxOutputBytes: 1024 * 1024,
    maxInputBytes: 4 * 1024 * 1024,
    maxModuleBytes: 32 * 1024 * 1024,
  },
  /** The Envoy external processor (`guardrails.ext_proc`): agentgateway buffers 2 MiB bodies. */
  guardrails: {
    extProc: {
      maxBodyBytes: 2 * 1024 * 1024,
      maxBatch: 100,
      bodyTimeout: '10s',
      decisionTimeout: '2s',
      maxStreams: 1000,
    },
  },
  judge: {
    maxConcurrency: 4,
    requestsPerSecond: 10,
    timeout: '60s',
    maxRetries: 3,
  },
} as const;
