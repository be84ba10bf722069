import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildServer, DEFAULT_UI_DIR, type ServerDeps } from '../api/index.js';
import { type Config, isLoopbackListen, splitListen } from '../config/index.js';
import { type Component, component } from '../core/index.js';
import { mcpRoutes } from '../mcp/index.js';
import type { Store } from '../store/index.js';
import { ingestConcurrency } from './build-ingest.js';

export function authRequired(config: Config): boolean {
  if (config.no_auth) return false;
  return config.auth !== undefined || !isLoopbackListen(config.listen);
}

/** What the HTTP edge serves; the rest of its deps come from config. */
export type ServedServices = Omit<
  ServerDeps,
  | 'logger'
  | 'bodyLimit'
  | 'requestTimeoutMs'
  | 'authRequired'
  | 'maxAttributeBytes'
  | 'uiDir'
  | 'writeLimits'
  | 'ingestConcurrency'
  | 'ready'
>;

/**
 * The HTTP server as configured, and its component: started, it listens on `listen`; stopped, it
 * stops accepting and drains requests in flight, cutting connections still open after
 * `shutdown_timeout`.
 */
export async function buildHttpServer(
  config: Readonly<Config>,
  deps: { store: Store; logger: Logger; services: ServedServices },
): Promise<{ server: FastifyInstance; component: Component }> {
  const { store } = deps;
  const server = await buildServer({
    ...deps.services,
    logger: deps.logger,
    bodyLimit: config.limits.max_body_bytes,
    requestTimeoutMs: config.limits.request_timeout,
    maxConnections: config.limits.max_connections,
    authRequired: authRequired(config),
    maxAttributeBytes: config.traces.max_attribute_bytes,
    uiDir: config.ui.enabled ? (config.ui.assets_dir ?? DEFAULT_UI_DIR) : undefined,
    writeLimits: {
      maxRequests: config.limits.max_inflight_write_requests,
      maxBytes: config.limits.max_inflight_write_bytes,
    },
    ingestConcurrency: ingestConcurrency(config),
    ready: async () => {
      await store.ping();
      if (!(await store.migrationsApplied())) throw new Error('migrations not applied');
    },
  });
  if (config.mcp.enabled) {
    await server.register(mcpRoutes, {
      services: deps.services,
      allowedOrigins: config.mcp.allowed_origins,
      loopback: isLoopbackListen(config.listen),
      issuers: config.auth?.oidc.map((o) => o.issuer) ?? [],
    });
  }
  const serving = component('http-server', {
    start: () => server.listen(splitListen(config.listen)),
    stop: async () => {
      const timer = setTimeout(
        () => server.server.closeAllConnections?.(),
        config.shutdown_timeout,
      );
      timer.unref();
      try {
        await server.close();
      } finally {
        clearTimeout(timer);
      }
    },
  });
  return { server, component: serving };
}

/** The address a listening server is bound to (`127.0.0.1:4318`, `[::1]:4318`). */
export function boundAddress(server: FastifyInstance, listen: string): string {
  const addr = server.server.address();
  if (addr === null || typeof addr === 'string') return listen;
  return addr.family === 'IPv6' ? `[${addr.address}]:${addr.port}` : `${addr.address}:${addr.port}`;
}
