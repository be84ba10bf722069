import { z } from 'zod';
import { defineConnector } from '../../connector.js';
import { createPhoenixConnector, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './connector.js';

/** Arize Phoenix: one project per source, named by its one location. */
export const phoenix = defineConnector({
  manifest: {
    type: 'phoenix',
    description: 'Arize Phoenix (REST /v1); one project per source.',
    capabilities: ['list', 'fetch', 'write-back'],
    config: z
      .looseObject({
        endpoint: z.string(),
        locations: z.array(z.string()).length(1, 'phoenix takes exactly one project'),
      })
      .transform((spec) => ({ endpoint: spec.endpoint, project: spec.locations[0] as string })),
    defaults: { pageSize: DEFAULT_PAGE_SIZE, maxPageSize: MAX_PAGE_SIZE },
  },
  create: (config, ctx) =>
    createPhoenixConnector({
      endpoint: config.endpoint,
      project: config.project,
      http: ctx.http,
      ...(ctx.credential === undefined ? {} : { apiKey: () => ctx.credential }),
      ...(ctx.settings.pageSize === undefined ? {} : { pageSize: ctx.settings.pageSize }),
      maxAttributeBytes: ctx.settings.maxAttributeBytes,
    }),
});
