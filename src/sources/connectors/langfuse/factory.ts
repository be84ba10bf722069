import { z } from 'zod';
import { defineConnector } from '../../connector.js';
import { createLangfuseConnector, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './connector.js';

/** Langfuse: one environment per source at most (every environment when none is named). */
export const langfuse = defineConnector({
  manifest: {
    type: 'langfuse',
    description: 'Langfuse v4 (or v3 with the v4 read path); at most one environment per source.',
    capabilities: ['list', 'fetch', 'write-back'],
    config: z
      .looseObject({
        endpoint: z.string(),
        locations: z.array(z.string()).max(1, 'langfuse takes at most one environment'),
      })
      .transform((spec) => ({ endpoint: spec.endpoint, environment: spec.locations[0] })),
    defaults: { pageSize: DEFAULT_PAGE_SIZE, maxPageSize: MAX_PAGE_SIZE },
  },
  create: (config, ctx) =>
    createLangfuseConnector({
      endpoint: config.endpoint,
      ...(config.environment === undefined ? {} : { environment: config.environment }),
      http: ctx.http,
      // `<public key>:<secret key>`, sent as HTTP Basic auth.
      ...(ctx.credential === undefined ? {} : { credential: () => ctx.credential }),
      ...(ctx.settings.pageSize === undefined ? {} : { pageSize: ctx.settings.pageSize }),
      maxAttributeBytes: ctx.settings.maxAttributeBytes,
    }),
});
