import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { Clock } from '../core/index.js';
import { normalizeStoredTrace, PulledTraceWriter, type SpanLimits } from '../ingest/index.js';
import {
  type CredentialResolver,
  createCredentialResolver,
  createHttpClient,
  createOutboundGuard,
  type HttpClient,
  proxySettingsFromConfig,
} from '../net/index.js';
import type { Redactor } from '../redaction/index.js';
import type { RunService } from '../runs/index.js';
import {
  type ConnectorSettings,
  compileOverrides,
  findConnector,
  type ParsedSource,
  resultSinks,
  SourceDirectory,
  SourceErrors,
  SourceManager,
  type SourceManagerDeps,
  SourceService,
  type SourceServiceDeps,
  type TraceStoreConnector,
  WriteBackWriter,
} from '../sources/index.js';
import type { Store } from '../store/index.js';
import type { BuildBase } from './base.js';
import type { RunsParts } from './build-runs.js';
import { closes } from './lifecycle.js';

/**
 * Pulling from trace sources and writing scores back to them: the manager, the write-back
 * writer, the directory both read sources from, and the result sink policies and annotations
 * hand their results to.
 */
export function buildSourcePulling(
  config: Readonly<Config>,
  deps: BuildBase & {
    redactor: Redactor;
    limits: SpanLimits;
    connector: SourceManagerDeps['connector'];
    /** The runs scheduled sources create (built after sources). */
    runs: () => Pick<RunsParts, 'service' | 'executor'>;
  },
) {
  const { store, clock, logger, metrics, redactor, connector } = deps;
  const directory = new SourceDirectory({ store, clock });
  const pulled = new PulledTraceWriter({
    store,
    redactor,
    clock,
    normalize: normalizeStoredTrace,
    observer: metrics,
    limits: deps.limits,
  });
  const manager = new SourceManager({
    store,
    clock,
    connector,
    write: (trace, adjust) => pulled.write(trace, adjust),
    snapshot: (trace, adjust) => pulled.snapshot(trace, adjust),
    onRunCreated: () => deps.runs().executor.wake(),
    overrides: (source) => {
      const project = source.project ?? 'default';
      return compileOverrides(source, project, (field, reason) =>
        metrics.onOverrideError(project, source.name, field, reason),
      );
    },
    observer: metrics,
    logger,
    redactText: (text) => redactor.redactText(text),
    options: {
      maxRecordsPerSecond: config.sources.max_records_per_second,
      leaseMs: config.sources.lease_timeout,
    },
  });
  const writeBacks = new WriteBackWriter({
    store,
    clock,
    directory,
    connector,
    observer: metrics,
    logger,
    redactText: (text) => redactor.redactText(text),
  });
  return { directory, sinks: resultSinks(directory, clock), manager, writeBacks };
}

/** The outbound rules of trace-source endpoints: https to public names unless allow-listed. */
function sourceGuard(config: Readonly<Config>) {
  return createOutboundGuard({
    allowHosts: config.sources.allow_hosts,
    requireHttps: true,
    setting: 'sources.allow_hosts',
  });
}

function credentialResolver(config: Readonly<Config>, env: Record<string, string | undefined>) {
  return createCredentialResolver({
    env,
    dir: config.sources.dir ?? join(config.data_dir, 'secrets'),
    grants: config.credentials.grants,
  });
}

/**
 * Checks a scheduled source's run spec as a run of the window would be created: with the
 * caller's permissions, a stand-in record for the window's traces, and nothing stored.
 */
export function scheduledRunCheck(runs: () => RunService): SourceServiceDeps['checkRunSpec'] {
  return async (caller, runSpec, project) => {
    await runs().create(
      caller,
      { name: 'scheduled-window', project, dataset: { records: [{ input: '' }] }, ...runSpec },
      { validateOnly: true },
    );
  };
}

/** The source resource's service as configured (the server and the CLI's local mode build it). */
export function createSourceService(
  config: Readonly<Config>,
  deps: {
    store: Store;
    clock: Clock;
    env: Record<string, string | undefined>;
    logger: Logger;
    onChange?: () => void;
    checkRunSpec?: SourceServiceDeps['checkRunSpec'];
  },
): SourceService {
  const credentials = credentialResolver(config, deps.env);
  return new SourceService({
    store: deps.store,
    clock: deps.clock,
    guard: sourceGuard(config),
    grants: { check: (ref, project, host) => credentials.checkGrant(ref, project, host) },
    supported: (connector, variant) => findConnector(connector, variant) !== undefined,
    logger: deps.logger,
    ...(deps.onChange === undefined ? {} : { onChange: deps.onChange }),
    ...(deps.checkRunSpec === undefined ? {} : { checkRunSpec: deps.checkRunSpec }),
  });
}

/** Builds a source's connector with its credential resolved now (rotation applies at once). */
function connectorFactory(
  http: HttpClient,
  credentials: CredentialResolver,
  settings: ConnectorSettings,
): (source: ParsedSource, project: string) => Promise<TraceStoreConnector> {
  return async (source, project) => {
    const manifest = findConnector(source.spec.connector, source.spec.variant);
    if (manifest === undefined) {
      throw SourceErrors.SOURCE_NOT_SUPPORTED_YET(
        `connector "${source.spec.connector}" is not supported by this version`,
      );
    }
    const host = new URL(source.spec.endpoint).hostname;
    const credential =
      source.spec.credentials === undefined
        ? undefined
        : await credentials.resolveGranted(source.spec.credentials, project, host);
    return manifest.create(source, {
      http,
      settings,
      ...(credential === undefined ? {} : { credential }),
    });
  };
}

/** The HTTP client of trace-source connectors, under the source endpoints' outbound rules. */
function createSourceHttpClient(config: Readonly<Config>, clock: Clock): HttpClient {
  return createHttpClient({
    userAgent: 'touchstone-sources',
    ...sourceGuard(config),
    clock,
    maxRedirects: 5,
    proxy: proxySettingsFromConfig(config.proxy),
  });
}

/**
 * Trace sources as served: the resource service, pulling and write-back (woken when a source
 * changes), the credentials their connectors resolve, and the connectors' HTTP client.
 */
export function buildSources(
  config: Readonly<Config>,
  deps: Omit<Parameters<typeof buildSourcePulling>[1], 'connector'> & {
    env: Record<string, string | undefined>;
  },
) {
  const http = createSourceHttpClient(config, deps.clock);
  const credentials = credentialResolver(config, deps.env);
  const connector = connectorFactory(http, credentials, {
    maxAttributeBytes: config.traces.max_attribute_bytes,
  });
  const pulling = buildSourcePulling(config, { ...deps, connector });
  const service = createSourceService(config, {
    ...deps,
    checkRunSpec: scheduledRunCheck(() => deps.runs().service),
    onChange: () => {
      pulling.directory.invalidate();
      pulling.manager.wake();
    },
  });
  return { ...pulling, service, credentials, component: closes('source-http', http) };
}
