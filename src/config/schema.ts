import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { ROLES } from '../core/index.js';
import { DEFAULTS } from './defaults.js';
import { durationMs } from './duration.js';
import { isSecureOrLoopback } from './listen.js';

/** Names an environment variable whose value is a secret; the value never sits in config. */
export const CredentialRefSchema = z.strictObject({
  env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
});

/**
 * Names a secret without holding it: an environment variable, or the file `<secret>/<key>` under
 * `sources.dir` (read afresh at every use, so a rotated secret applies without a restart).
 */
export const SecretRefSchema = z.union([
  CredentialRefSchema,
  z.strictObject({
    file: z
      .string()
      .regex(
        /^(?!\.\.?\/)[A-Za-z0-9._-]{1,253}\/(?!\.\.?$)[A-Za-z0-9._-]{1,253}$/,
        'expected <secret>/<key>',
      ),
  }),
]);

/**
 * A host pattern in the `allow_hosts` syntax: an exact name, `*.suffix`, an IP literal, a CIDR
 * range, or `*`. (The outbound guard compiles the same syntax; checking it here reports a bad
 * pattern with its path at load.)
 */
const HostPatternSchema = z
  .string()
  .min(1)
  .refine(
    (raw) => {
      const p = raw.trim();
      if (p === '*') return true;
      if (p.startsWith('*.')) return p.length > 2 && !p.slice(2).includes('*');
      if (p.includes('*')) return false;
      return !p.includes('/') || ipaddr.isValidCIDR(p.replace(/^\[(.*)\]/, '$1'));
    },
    { message: 'expected a name, *.suffix, IP address, CIDR range or *' },
  );

/**
 * An OIDC issuer URL: https, or plain http only on a loopback host (a development provider).
 * The discovery document must name exactly this issuer.
 */
const IssuerUrlSchema = z.url().refine((raw) => isSecureOrLoopback(new URL(raw)), {
  message: 'an issuer must be https (plain http only on a loopback host)',
});

/** A claim's accepted value, or any of a list of values (an array claim matches any element). */
const ClaimMatchSchema = z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]);

/** One claims → project and roles rule of an issuer; every condition given must hold. */
const OidcMappingSchema = z
  .strictObject({
    /** Claims that must have these values (`{repository: acme/agent, ref: refs/heads/main}`). */
    claims: z.record(z.string().min(1), ClaimMatchSchema).default({}),
    /** At least one of these groups must be in the issuer's groups claim. */
    groups: z.array(z.string().min(1)).min(1).optional(),
    project: z
      .string()
      .regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'project names are lowercase letters, digits, _ . -'),
    roles: z.array(z.enum(ROLES)).min(1),
    /**
     * Narrows what the mapped callers read (traces, scores), as an API key's `scope`: only these
     * services and/or traces carrying these labels.
     */
    scope: z
      .strictObject({
        services: z.array(z.string().min(1)).min(1).optional(),
        labels: z.record(z.string().min(1), z.string().max(256)).optional(),
      })
      .optional(),
  })
  .refine((m) => Object.keys(m.claims).length > 0 || m.groups !== undefined, {
    message: 'a mapping needs claims or groups (one matching every token is refused)',
  });

/** An identity provider whose tokens (ID tokens, workflow tokens) are accepted as bearers. */
const OidcIssuerSchema = z.strictObject({
  issuer: IssuerUrlSchema,
  /** Accepted `aud` values: the client ID of the CLI/UI, or the audience a workflow asks for. */
  audiences: z.array(z.string().min(1)).min(1),
  /** The claim holding the caller's groups (a list, or one string). Default `groups`. */
  groups_claim: z.string().min(1).default('groups'),
  /** Tried in order: the first mapping whose conditions hold gives the project and roles. */
  mappings: z.array(OidcMappingSchema).min(1),
});

/** One part of a `file: <secret>/<key>` credential: no separators, no `.` or `..`. */
const SECRET_SEGMENT = /^(?!\.\.)[A-Za-z0-9._-]{1,253}$/;

/** `credentials.grants[].env`: a variable name, or `file:<secret>/<key>` for a file credential. */
const GrantKeySchema = z.string().refine(
  (key) => {
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return true;
    if (!key.startsWith('file:')) return false;
    const parts = key.slice('file:'.length).split('/');
    return parts.length === 2 && parts.every((part) => SECRET_SEGMENT.test(part) && part !== '.');
  },
  { message: 'expected an environment variable name or file:<secret>/<key>' },
);

export const CredentialGrantSchema = z.strictObject({
  /** The variable name, or `file:<secret>/<key>` for a file credential under `sources.dir`. */
  env: GrantKeySchema,
  /** Projects that may use the credential: names, `*` wildcards (`team-*`), or `*` for all. */
  projects: z
    .array(
      z
        .string()
        .regex(/^[a-z0-9*][a-z0-9_.*-]{0,62}$/, 'a project name or a pattern with * wildcards'),
    )
    .min(1),
  /** Endpoint hosts the credential may be sent to (`allow_hosts` syntax); empty = any host. */
  hosts: z.array(HostPatternSchema).default([]),
});
export type CredentialGrantConfig = z.infer<typeof CredentialGrantSchema>;

/** A proxy URL (`http://[user:password@]host:port`; a bare `host:port` means http). */
const ProxyUrlSchema = z.string().refine(
  (raw) => {
    const text = raw.trim();
    if (text === '') return true;
    const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
    return URL.canParse(withScheme) && /^https?:$/.test(new URL(withScheme).protocol);
  },
  // Never echo the value: a proxy URL may carry a password.
  { message: 'expected an http:// or https:// proxy URL' },
);

/** Accepts camelCase spellings of some keys (as they appear in resource YAML) beside snake_case. */
function aliasKeys(aliases: Record<string, string>) {
  return (value: unknown) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[aliases[k] ?? k] = v;
    return out;
  };
}

export const JudgeConfigSchema = z.preprocess(
  aliasKeys({ maxConcurrency: 'max_concurrency', requestsPerSecond: 'requests_per_second' }),
  z.strictObject({
    /** OpenAI-compatible base URL, e.g. `https://api.openai.com/v1`. */
    endpoint: z.url(),
    model: z.string().min(1),
    credential: CredentialRefSchema.optional(),
    max_concurrency: z.int().positive().default(DEFAULTS.judge.maxConcurrency),
    requests_per_second: z.number().positive().default(DEFAULTS.judge.requestsPerSecond),
    timeout: durationMs.prefault(DEFAULTS.judge.timeout),
    max_retries: z.int().nonnegative().default(DEFAULTS.judge.maxRetries),
  }),
);
export type JudgeConfig = z.infer<typeof JudgeConfigSchema>;

/** A retention: a duration, or `0` (also unquoted in YAML) for "keep forever". */
const RetentionSchema = z.union([z.literal(0), durationMs]);

/**
 * `SECRET_DETECTORS` of src/redaction (config may not import it; a test there checks the two
 * lists are the same).
 */
export const SECRET_DETECTOR_NAMES = [
  'http-auth',
  'password',
  'url-userinfo',
  'url-query',
  'private-key',
  'jwt',
  'aws',
  'github',
  'gitlab',
  'slack',
  'stripe',
  'llm-api-key',
  'google-api-key',
] as const;

const ListenSchema = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/, 'expected HOST:PORT');

export const ConfigSchema = z
  .strictObject({
    /** HOST:PORT the server listens on. */
    listen: ListenSchema.default(DEFAULTS.listen),
    /** Where the embedded SQLite database and local files live. */
    data_dir: z.string().min(1).default(DEFAULTS.dataDir),
    log_level: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      .default('info'),
    /** How long shutdown waits for in-flight requests before closing connections. */
    shutdown_timeout: durationMs.prefault(DEFAULTS.shutdownTimeout),
    store: z
      .strictObject({
        driver: z.enum(['sqlite', 'postgres']).default('sqlite'),
        /** PostgreSQL connection URL (driver postgres). */
        url: z.string().optional(),
        pool_size: z.int().positive().default(DEFAULTS.store.poolSize),
      })
      .prefault({})
      .refine((s) => s.driver !== 'postgres' || (s.url !== undefined && s.url !== ''), {
        message: 'store.url is required when store.driver is postgres',
        path: ['url'],
      }),
    /** Present = callers must authenticate. Absent is allowed only on loopback or with --no-auth. */
    auth: z
      .strictObject({
        /** Accept API keys created with `touchstone keys create` (the default). */
        api_keys: z.boolean().default(true),
        /** Identity providers whose bearer tokens are accepted (docs/identity.md). */
        oidc: z.array(OidcIssuerSchema).default([]),
        /**
         * Issuer and JWKS hosts (`allow_hosts` syntax) that may be private or loopback; other
         * providers must be public https names.
         */
        allow_hosts: z.array(HostPatternSchema).default([]),
        /** Deadline of one discovery or JWKS request to a provider. */
        oidc_timeout: durationMs.prefault(DEFAULTS.auth.oidcTimeout),
        /**
         * Access rules checked after the roles on every call: CEL over `principal`, `action`,
         * `resource` and `mcp`; deny wins, and allow rules never grant what roles do not
         * (docs/identity.md). Compiled at startup.
         */
        rules: z
          .array(
            z.strictObject({
              effect: z.enum(['allow', 'deny']),
              when: z.string().min(1),
            }),
          )
          .max(DEFAULTS.auth.maxRules)
          .default([]),
      })
      .optional(),
    /** The audit trail of writes and denials (docs/identity.md). */
    audit: z
      .strictObject({
        /** How long audit entries are kept. */
        retention: durationMs.prefault(DEFAULTS.audit.retention),
      })
      .prefault({}),
    /** Set by `--no-auth`: run without authentication even off loopback. */
    no_auth: z.boolean().default(false),
    limits: z
      .strictObject({
        /** Largest accepted request body. */
        max_body_bytes: z.int().positive().default(DEFAULTS.limits.maxBodyBytes),
        /** Most records in one evaluate request. */
        max_evaluate_records: z.int().positive().default(DEFAULTS.limits.maxEvaluateRecords),
        /**
         * Write requests (OTLP ingest, REST writes, RPC) in flight at once; more are refused with
         * 503 and `Retry-After` before their body is read. Reads are not counted.
         */
        max_inflight_write_requests: z
          .int()
          .positive()
          .default(DEFAULTS.limits.maxInflightWriteRequests),
        /**
         * Body bytes (as received, and inflated) held by write requests in flight; past it,
         * writes are refused with 503 and `Retry-After`. One larger request is let in alone.
         */
        max_inflight_write_bytes: z.int().positive().default(DEFAULTS.limits.maxInflightWriteBytes),
        /**
         * Longest a client may take to send a whole request (headers and body); past it the
         * server answers 408 and closes the connection over HTTP/1.1 (checked every 5 s), and
         * resets the stream over HTTP/2, so a client trickling a body cannot hold a write's place
         * for ever. `0` turns it off.
         */
        request_timeout: durationMs.prefault(DEFAULTS.limits.requestTimeout),
        /**
         * Connections open at once (HTTP/1.1 and HTTP/2 together); past it new connections are
         * closed at once, and a warning is logged at most once a minute. Keep it under the
         * process's open-files limit (`ulimit -n`), which the database's files share.
         */
        max_connections: z.int().positive().default(DEFAULTS.limits.maxConnections),
      })
      .prefault({}),
    traces: z
      .strictObject({
        redaction: z
          .strictObject({
            /** Glob rules for attribute/metadata keys, added to the built-in defaults. */
            keys: z.array(z.string().min(1)).default([]),
            /** RE2 regexes; matching parts of values are replaced. */
            patterns: z.array(z.string().min(1)).default([]),
            /** PII detectors to enable (none by default). */
            pii: z.array(z.enum(['email', 'us-ssn', 'credit-card', 'phone'])).default([]),
            /** Built-in secret detectors: true (all, the default), false, or all but `disabled`. */
            secrets: z
              .union([
                z.boolean(),
                z.strictObject({ disabled: z.array(z.enum(SECRET_DETECTOR_NAMES)).default([]) }),
              ])
              .default(true),
            /** Opt out of all redaction. */
            disabled: z.boolean().default(false),
          })
          .prefault({}),
        /** A trace is complete this long after its root span ended. */
        completion_grace: durationMs.prefault(DEFAULTS.traces.completionGrace),
        /** …or after no span arrived for this long. */
        idle_timeout: durationMs.prefault(DEFAULTS.traces.idleTimeout),
        /** …or at the latest this long after its first span arrived. */
        max_age: durationMs.prefault(DEFAULTS.traces.maxAge),
        /**
         * Complete a trace in the request that stores it when the request brings all of it (one
         * root, every parent present), instead of after `completion_grace` in the completion
         * worker (docs/ingest.md).
         */
        complete_on_arrival: z.boolean().default(true),
        /**
         * Worker threads that decode, hold to the limits, redact and normalize OTLP trace
         * requests, leaving the thread holding the store's connection only the statements; 0
         * does all of it on that thread (the default: a worker's heap takes the server past its
         * 300 MB budget while scoring; docs/ingest.md).
         */
        ingest_threads: z.int().min(0).max(16).default(DEFAULTS.traces.ingestThreads),
        /** Longest attribute value kept; longer strings are cut with a marker. */
        max_attribute_bytes: z.int().positive().default(DEFAULTS.traces.maxAttributeBytes),
        /**
         * What one span may hold. Longer keys and names are cut with a marker; attributes, events
         * and links past a count are dropped and counted in the span's dropped counts.
         */
        limits: z
          .strictObject({
            /** Longest attribute key kept (UTF-8 bytes), at any depth, resource keys included. */
            max_attribute_key_bytes: z
              .int()
              .positive()
              .default(DEFAULTS.traces.limits.maxAttributeKeyBytes),
            /** Longest span and event name, scope name and scope version kept (UTF-8 bytes). */
            max_name_bytes: z.int().positive().default(DEFAULTS.traces.limits.maxNameBytes),
            /** Attributes a span keeps (the first ones). */
            max_attributes_per_span: z
              .int()
              .nonnegative()
              .default(DEFAULTS.traces.limits.maxAttributesPerSpan),
            /** Events a span keeps (the first ones). */
            max_events_per_span: z
              .int()
              .nonnegative()
              .default(DEFAULTS.traces.limits.maxEventsPerSpan),
            /** Links a span keeps (the first ones). */
            max_links_per_span: z
              .int()
              .nonnegative()
              .default(DEFAULTS.traces.limits.maxLinksPerSpan),
            /** Attributes each event keeps. */
            max_attributes_per_event: z
              .int()
              .nonnegative()
              .default(DEFAULTS.traces.limits.maxAttributesPerEvent),
            /** Attributes each link keeps. */
            max_attributes_per_link: z
              .int()
              .nonnegative()
              .default(DEFAULTS.traces.limits.maxAttributesPerLink),
          })
          .prefault({}),
      })
      .prefault({}),
    /** The online scoring engine (every replica runs one; claims are exclusive). */
    online: z
      .strictObject({
        /** Set false on replicas that should only ingest and serve. */
        enabled: z.boolean().default(true),
        /**
         * Score in a worker thread of its own (its own store connection), which also completes
         * traces, instead of on the thread answering requests: fresher results under load, for
         * about 35–50 MB more memory than `false` (scoring on that thread, completion in a
         * worker of its own).
         */
        worker: z.boolean().default(true),
        /** Traces scored at once per replica (judge stages wait on the network). */
        concurrency: z.int().min(1).max(256).default(DEFAULTS.online.concurrency),
        /** Work items claimed per round trip. */
        batch_size: z.int().min(1).max(1000).default(DEFAULTS.online.batchSize),
        /** A claimed item hidden this long; a replica that died loses it after. */
        visibility_timeout: durationMs.prefault(DEFAULTS.online.visibilityTimeout),
        /** How often the queue is polled when nothing wakes the engine. */
        poll_interval: durationMs.prefault(DEFAULTS.online.pollInterval),
      })
      .prefault({}),
    webhooks: z
      .strictObject({
        max_attempts: z.int().min(1).max(20).default(DEFAULTS.webhooks.maxAttempts),
        timeout: durationMs.prefault(DEFAULTS.webhooks.timeout),
        retention: durationMs.prefault(DEFAULTS.webhooks.retention),
        /** Hosts (wildcards allowed) that may be private, loopback or plain http. */
        allow_hosts: z.array(HostPatternSchema).default([]),
      })
      .prefault({}),
    /** Trace sources (pulled from external stores) and their endpoint rules. */
    sources: z
      .strictObject({
        /**
         * Endpoint hosts exempt from "https to a public name": names, `*.suffix`, IPs, CIDR
         * ranges or `*`. Such endpoints may be plain http, private, loopback or cluster-internal.
         */
        allow_hosts: z.array(HostPatternSchema).default([]),
        /**
         * Where `credentials: {file: <secret>/<key>}` is read from (`<dir>/<secret>/<key>`, read
         * afresh at every use). Default `<data_dir>/secrets`.
         */
        dir: z.string().min(1).optional(),
        /** Pull rate cap per source unless its `poll.maxRecordsPerSecond` says otherwise. */
        max_records_per_second: z
          .int()
          .min(1)
          .max(100_000)
          .default(DEFAULTS.sources.maxRecordsPerSecond),
        /**
         * A source's lease: another replica takes a source over this long after the replica
         * pulling it (or fetching its window) stopped. Renewed after every page, so a page read
         * must finish within it; a store whose searches run longer gets their budget instead.
         */
        lease_timeout: durationMs
          .pipe(z.number().min(10_000, 'at least 10s'))
          .prefault(DEFAULTS.sources.leaseTimeout),
      })
      .prefault({}),
    /** Uploaded and imported datasets of offline runs (docs/datasets.md). */
    datasets: z
      .strictObject({
        /**
         * Where datasets are kept: a local directory (default `<data_dir>/datasets`) or an
         * S3-compatible bucket written `s3://bucket/prefix` (then `datasets.s3` is required).
         */
        root: z.string().min(1).optional(),
        /** The bucket's endpoint and credentials, for an `s3://` root. */
        s3: z
          .strictObject({
            /**
             * The S3 API endpoint, e.g. `http://minio.internal:9000`; default
             * `https://s3.<region>.amazonaws.com`. Its host is allowed for outbound calls even
             * when private or plain http: the operator names it here.
             */
            endpoint: z.url().optional(),
            region: z.string().min(1).default(DEFAULTS.datasets.s3Region),
            access_key_id: SecretRefSchema,
            secret_access_key: SecretRefSchema,
            /** For temporary credentials. */
            session_token: SecretRefSchema.optional(),
            /** `<endpoint>/<bucket>/<key>` (true) or `<bucket>.<endpoint host>/<key>` (false). */
            path_style: z.boolean().default(true),
          })
          .optional(),
      })
      .prefault({}),
    /** Offline runs (docs/runs.md): execution, target hosts and retention. */
    runs: z
      .strictObject({
        /** Finished runs are deleted this long after they finished (`0` keeps them forever). */
        retention: RetentionSchema.prefault(DEFAULTS.runs.retention),
        /** Per project, instead of `retention` (`0` keeps that project's runs forever). */
        project_retention: z
          .record(
            z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'a project name'),
            RetentionSchema,
          )
          .default({}),
        /** Runs one replica executes at once. */
        max_concurrent: z.int().min(1).max(64).default(DEFAULTS.runs.maxConcurrent),
        /** A run's lease: another replica adopts a run this long after its executor stopped. */
        lease_timeout: durationMs
          .pipe(z.number().min(1000, 'at least 1s'))
          .prefault(DEFAULTS.runs.leaseTimeout),
        /**
         * Target hosts (`allow_hosts` syntax) that may be private, loopback or plain http; other
         * targets must be public names.
         */
        allow_hosts: z.array(HostPatternSchema).default([]),
      })
      .prefault({}),
    /** Which projects (and endpoint hosts) may use which credential references. */
    credentials: z
      .strictObject({
        grants: z.array(CredentialGrantSchema).default([]),
      })
      .prefault({}),
    /**
     * Outbound proxy for sources, webhooks and judges. Filled from the standard `HTTPS_PROXY`,
     * `HTTP_PROXY` and `NO_PROXY` variables (lower-case spellings win, as in curl) unless set
     * here or with `TOUCHSTONE_PROXY__*`. Targets are still resolved and checked locally.
     */
    proxy: z
      .strictObject({
        /** Proxy for https targets; `http_proxy` when unset. */
        https_proxy: ProxyUrlSchema.optional(),
        /** Proxy for http targets (and https ones without `https_proxy`). */
        http_proxy: ProxyUrlSchema.optional(),
        /** Comma-separated hosts reached directly: names (with subdomains), IPs, CIDRs, `*`. */
        no_proxy: z.string().optional(),
      })
      .prefault({}),
    /** The read-only web UI at /ui/ (docs/ui.md). */
    ui: z
      .strictObject({
        /** Serve the web UI at /ui/; false answers 404 there. */
        enabled: z.boolean().default(true),
        /**
         * The built UI's directory (`index.html` and `assets/`); default the package's own
         * `dist/ui`, which `npm run build` and `npm install` in a checkout write.
         */
        assets_dir: z.string().min(1).optional(),
        /**
         * Sign in to the UI at an identity provider (authorization code with PKCE) instead of
         * with an API key (docs/identity.md). The issuer must be one of `auth.oidc`, and the
         * client ID one of its `audiences`.
         */
        sign_in: z
          .strictObject({
            issuer: IssuerUrlSchema,
            /** The UI's own client at the provider: a public client, no secret. */
            client_id: z.string().min(1).max(256),
            scopes: z
              .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'a scope is visible ASCII'))
              .min(1)
              .refine((s) => s.includes('openid'), { message: 'must include openid' })
              .default([...DEFAULTS.ui.signInScopes]),
          })
          .optional(),
      })
      .prefault({}),
    /** Sandboxed WebAssembly plug-in evaluators (docs/plugins.md). Absent = none. */
    plugins: z
      .strictObject({
        /** The plug-in index file (YAML or JSON); manifests and modules are relative to it. */
        index: z.string().min(1),
        /** sha256 (hex) of the index file's bytes. */
        index_sha256: z
          .string()
          .regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits')
          .optional(),
        /**
         * A file holding the index's sha256 (as `sha256sum` writes it), read again on every
         * reload, so a new index and its pin can be rolled out without a restart.
         */
        index_sha256_file: z.string().min(1).optional(),
        /** How often the index and its pin are checked for changes; `0` never reloads. */
        reload_interval: z
          .union([z.literal(0), durationMs])
          .prefault(DEFAULTS.plugins.reloadInterval),
        /** Worker threads running modules; `0` = one per core, at most 4. */
        workers: z.int().nonnegative().default(0),
        /** Defaults of every plug-in, and the most a manifest's `spec.limits` may ask for. */
        limits: z
          .strictObject({
            memory_mib: z.int().positive().default(DEFAULTS.plugins.memoryMiB),
            max_memory_mib: z.int().positive().max(4096).default(DEFAULTS.plugins.maxMemoryMiB),
            timeout: durationMs.prefault(DEFAULTS.plugins.timeout),
            max_timeout: durationMs.prefault(DEFAULTS.plugins.maxTimeout),
            max_output_bytes: z.int().positive().default(DEFAULTS.plugins.maxOutputBytes),
            max_input_bytes: z.int().positive().default(DEFAULTS.plugins.maxInputBytes),
            max_module_bytes: z.int().positive().default(DEFAULTS.plugins.maxModuleBytes),
          })
          .prefault({}),
      })
      .refine((p) => (p.index_sha256 === undefined) !== (p.index_sha256_file === undefined), {
        message: 'set exactly one of index_sha256 and index_sha256_file: nothing runs unpinned',
        path: ['index_sha256'],
      })
      .optional(),
    /** The tool-protocol (MCP) server at /mcp (docs/mcp.md). */
    mcp: z
      .strictObject({
        /** Serve /mcp; false answers 404 there (`touchstone mcp` over stdio needs it). */
        enabled: z.boolean().default(true),
        /**
         * Web origins (`https://host[:port]`) whose pages may call /mcp. Requests without an
         * `Origin` (desktop and command-line clients) are not affected; on a loopback server,
         * localhost pages are allowed too.
         */
        allowed_origins: z
          .array(z.string().regex(/^https?:\/\/[^/\s]+$/, 'an origin: scheme://host[:port]'))
          .default([]),
      })
      .prefault({}),
    /** Gateway guardrails (docs/guardrails.md). */
    guardrails: z
      .strictObject({
        /** The Envoy external processor (ext_proc v3, gRPC over h2c) guarding MCP traffic. */
        ext_proc: z
          .strictObject({
            /** HOST:PORT of its own gRPC port; unset, it is not served. */
            listen: ListenSchema.optional(),
            /**
             * The guard policy of a stream whose gateway names none in its
             * `x-touchstone-guard-policy` metadata.
             */
            policy: z.string().min(1).optional(),
            /**
             * Pass what the processor cannot decide (no policy named, no decision within
             * `decision_timeout`, a body not sent whole); false (the default) blocks.
             */
            fail_open: z.boolean().default(false),
            /** Largest request body guarded; larger ones are refused with 413. */
            max_body_bytes: z.int().positive().default(DEFAULTS.guardrails.extProc.maxBodyBytes),
            /** Most messages in one JSON-RPC batch. */
            max_batch: z.int().min(1).max(1000).default(DEFAULTS.guardrails.extProc.maxBatch),
            /**
             * Longest wait for a stream's first message and for a request body its headers
             * announce; past it the exchange is refused with 408.
             */
            body_timeout: durationMs.prefault(DEFAULTS.guardrails.extProc.bodyTimeout),
            /** Longest wait for the guard's decision on one body. */
            decision_timeout: durationMs.prefault(DEFAULTS.guardrails.extProc.decisionTimeout),
            /** Streams one gateway connection may have open at once. */
            max_streams: z
              .int()
              .min(1)
              .max(100_000)
              .default(DEFAULTS.guardrails.extProc.maxStreams),
          })
          .prefault({}),
      })
      .prefault({}),
    judges: z.record(z.string().regex(/^[a-z0-9][a-z0-9-_]*$/i), JudgeConfigSchema).default({}),
    /** Judge used when a request or policy names none. */
    default_judge: z.string().optional(),
  })
  .superRefine((c, ctx) => {
    const s3Root = c.datasets.root?.startsWith('s3://') === true;
    if (
      s3Root &&
      !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[^/]+)*\/?$/.test(c.datasets.root ?? '')
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['datasets', 'root'],
        message: 'expected s3://<bucket>[/<prefix>] with a valid bucket name',
      });
    }
    if (s3Root && c.datasets.s3 === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['datasets', 's3'],
        message: 'required when datasets.root is an s3:// bucket (endpoint, region, credentials)',
      });
    }
    if (!s3Root && c.datasets.s3 !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['datasets', 's3'],
        message: 'only used when datasets.root is an s3:// bucket',
      });
    }
    checkSignIn(c, ctx);
    if (c.default_judge !== undefined && !(c.default_judge in c.judges)) {
      ctx.addIssue({
        code: 'custom',
        path: ['default_judge'],
        message: `names judge "${c.default_judge}", which is not under judges`,
      });
    }
  })
  // `sources.dir` defaults under the data directory, wherever that was configured.
  .transform((c) => ({
    ...c,
    sources: { ...c.sources, dir: c.sources.dir ?? join(c.data_dir, DEFAULTS.sources.dirName) },
    datasets: {
      ...c.datasets,
      root: c.datasets.root ?? join(c.data_dir, DEFAULTS.datasets.dirName),
    },
  }));

export type Config = z.infer<typeof ConfigSchema>;

/** `ui.sign_in` names a provider whose ID tokens the server accepts for the UI's client. */
function checkSignIn(
  c: {
    ui: { sign_in?: { issuer: string; client_id: string } | undefined };
    auth?: { oidc: readonly { issuer: string; audiences: readonly string[] }[] } | undefined;
  },
  ctx: z.RefinementCtx,
): void {
  const signIn = c.ui.sign_in;
  if (signIn === undefined) return;
  const issuer = c.auth?.oidc.find((i) => i.issuer === signIn.issuer);
  if (issuer === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['ui', 'sign_in', 'issuer'],
      message: 'must be the issuer of one of auth.oidc (the UI signs people in there)',
    });
  } else if (!issuer.audiences.includes(signIn.client_id)) {
    ctx.addIssue({
      code: 'custom',
      path: ['ui', 'sign_in', 'client_id'],
      message: `must be one of the audiences of auth.oidc's issuer ${signIn.issuer} (its ID tokens are for that client)`,
    });
  }
}
