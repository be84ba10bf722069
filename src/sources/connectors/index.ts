import type { HttpClient } from '../../net/index.js';
import type { TraceStoreConnector } from '../connector.js';
import type { ParsedSource } from '../resource.js';
import { createLangfuseConnector } from './langfuse/index.js';
import { createMlflowConnector } from './mlflow/index.js';
import { createPhoenixConnector } from './phoenix/index.js';

/**
 * The connectors this build has, in one static list: each builds a TraceStoreConnector for a
 * source from its spec, the guarded HTTP client and the source's credential (resolved by the
 * caller at each pull, so a rotated secret applies at once).
 */

export interface ConnectorContext {
  http: HttpClient;
  /** The credential's value (bearer token, API key…), when the source names one. */
  credential?: string;
  pageSize?: number;
}

export interface ConnectorManifest {
  connector: string;
  /** Undefined = the open-source store (no variant). */
  variant?: string;
  create(source: ParsedSource, ctx: ConnectorContext): TraceStoreConnector;
}

export const CONNECTORS: readonly ConnectorManifest[] = [
  {
    connector: 'mlflow',
    create: (source, ctx) =>
      createMlflowConnector({
        endpoint: source.spec.endpoint,
        locations: source.spec.locations,
        http: ctx.http,
        ...(ctx.credential === undefined ? {} : { token: () => ctx.credential }),
        ...(ctx.pageSize === undefined ? {} : { pageSize: ctx.pageSize }),
      }),
  },
  {
    connector: 'phoenix',
    create: (source, ctx) =>
      createPhoenixConnector({
        endpoint: source.spec.endpoint,
        // Apply checks that a phoenix source names exactly one project.
        project: source.spec.locations[0] ?? '',
        http: ctx.http,
        ...(ctx.credential === undefined ? {} : { apiKey: () => ctx.credential }),
        ...(ctx.pageSize === undefined ? {} : { pageSize: ctx.pageSize }),
      }),
  },
  {
    connector: 'langfuse',
    create: (source, ctx) =>
      createLangfuseConnector({
        endpoint: source.spec.endpoint,
        // Apply checks that a langfuse source names at most one environment.
        ...(source.spec.locations[0] === undefined
          ? {}
          : { environment: source.spec.locations[0] }),
        http: ctx.http,
        // `<public key>:<secret key>`, sent as HTTP Basic auth.
        ...(ctx.credential === undefined ? {} : { credential: () => ctx.credential }),
        ...(ctx.pageSize === undefined ? {} : { pageSize: ctx.pageSize }),
      }),
  },
];

export function findConnector(
  connector: string,
  variant: string | undefined,
): ConnectorManifest | undefined {
  return CONNECTORS.find((c) => c.connector === connector && c.variant === variant);
}
