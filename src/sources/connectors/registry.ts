import { z } from 'zod';
import {
  type ConnectorContext,
  type ConnectorFactory,
  type ConnectorManifest,
  type ConnectorSettings,
  DEFAULT_CONNECTOR_SETTINGS,
  type SourceConnection,
  type TraceStoreConnector,
} from '../connector.js';

/** A connector this build creates, for a parsed source. */
export interface ConnectorBuilder {
  manifest: ConnectorManifest;
  /** `settings` are the server's; a build without them (tests, tools) uses the defaults. */
  create(
    source: { spec: SourceConnection },
    ctx: Omit<ConnectorContext, 'settings'> & { settings?: ConnectorSettings },
  ): TraceStoreConnector;
}

/**
 * Connector types and variants by (type, variant), built from one static list. A pair declared
 * twice is a programming error, refused at construction like evaluator types.
 */
export class ConnectorRegistry {
  private readonly byKey = new Map<string, ConnectorFactory>();

  constructor(factories: readonly ConnectorFactory[]) {
    for (const f of factories) {
      const { type, variant, capabilities } = f.manifest;
      const key = keyOf(type, variant);
      if (this.byKey.has(key)) throw new Error(`connector ${key} registered twice`);
      if (
        f.refused === undefined &&
        !(capabilities.includes('list') && capabilities.includes('fetch'))
      ) {
        throw new Error(`connector ${key} must list and fetch`);
      }
      this.byKey.set(key, f);
    }
  }

  get(type: string, variant: string | undefined): ConnectorFactory | undefined {
    return this.byKey.get(keyOf(type, variant));
  }

  /**
   * The declaration of a pair this build creates, with `create` taking a parsed source (its
   * connection validated at apply, so its config parses); undefined when it does not.
   */
  find(type: string, variant: string | undefined): ConnectorBuilder | undefined {
    const f = this.get(type, variant);
    const create = f?.refused === undefined ? f?.create : undefined;
    if (f === undefined || create === undefined) return undefined;
    return {
      manifest: f.manifest,
      create: (source, ctx) =>
        create(f.manifest.config.parse(source.spec), {
          ...ctx,
          settings: ctx.settings ?? DEFAULT_CONNECTOR_SETTINGS,
        }),
    };
  }

  list(): ConnectorFactory[] {
    return [...this.byKey.values()];
  }

  /** Connector types in declaration order. */
  types(): string[] {
    return [...new Set(this.list().map((f) => f.manifest.type))];
  }

  /** Variant names in declaration order. */
  variants(): string[] {
    return [...new Set(this.list().flatMap((f) => f.manifest.variant ?? []))];
  }
}

function keyOf(type: string, variant: string | undefined): string {
  return variant === undefined ? type : `${type}/${variant}`;
}

/** A variant the product refuses outright: specs naming it are refused with `reason`. */
export function refusedVariant(type: string, variant: string, reason: string): ConnectorFactory {
  return {
    manifest: {
      type,
      variant,
      description: reason,
      capabilities: [],
      config: z.unknown(),
      defaults: { pageSize: 0, maxPageSize: 0 },
    },
    refused: reason,
  };
}
