import { z } from 'zod';
import { type Capability, defineConnector, type TraceStoreConnector } from '../connector.js';

/**
 * A connector declared outside the built-in list, as a new store or variant would be: its own
 * config schema (two regions, named as its locations), its own auth key and the capabilities the
 * test gives it. `built` records what `create` was given.
 */
export function toyConnector(capabilities: readonly Capability[], variant?: string) {
  const built: { config: unknown; maxAttributeBytes: number }[] = [];
  const factory = defineConnector({
    manifest: {
      type: 'toy',
      ...(variant === undefined ? {} : { variant }),
      description: 'A store declared by a test.',
      capabilities,
      auth: { key: `toy${variant ?? ''}`, schema: z.strictObject({ tenant: z.string().min(1) }) },
      config: z
        .looseObject({
          endpoint: z.string(),
          locations: z
            .array(z.string().regex(/^[a-z]+-[0-9]$/, 'a toy region such as eu-1'))
            .length(2, 'toy reads exactly two regions'),
        })
        .transform((spec) => ({ url: spec.endpoint, regions: spec.locations })),
      defaults: { pageSize: 10, maxPageSize: 50 },
    },
    create: (config, ctx): TraceStoreConnector => {
      built.push({ config, maxAttributeBytes: ctx.settings.maxAttributeBytes });
      return {
        check: async () => undefined,
        list: async () => ({ traces: [] }),
        fetch: async () => new Map(),
        writeBack: async (items) => items.map(() => ({ status: 'created', remoteId: 'toy-1' })),
      };
    },
  });
  return { factory, built };
}

/** A TraceSource of the toy connector with `spec` merged over a valid one. */
export function toySource(spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'TraceSource',
    metadata: { name: 'toy-source' },
    spec: {
      connector: 'toy',
      endpoint: 'http://127.0.0.1:9/',
      locations: ['eu-1', 'us-2'],
      ...spec,
    },
  };
}
