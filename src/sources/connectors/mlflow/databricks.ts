import { z } from 'zod';
import { defineConnector, type SourceConnection } from '../../connector.js';
import { SourceErrors } from '../../error-codes.js';
import { createDatabricksConnector } from './databricks-connector.js';
import { MLFLOW_DEFAULTS, mlflowConnection } from './factory.js';
import { isCatalogSchema } from './unity-catalog.js';

/**
 * MLflow on Databricks: numeric experiment ids, or Unity Catalog `catalog.schema` locations read
 * through a SQL warehouse with a long-running search; never both in one source.
 */

const EXPERIMENT_ID = /^\d+$/;

const isSchema = isCatalogSchema;

function databricksAuth(spec: Pick<SourceConnection, 'auth'>): {
  clientId?: unknown;
  sqlWarehouseId?: unknown;
} {
  const auth = spec.auth?.databricks;
  return typeof auth === 'object' && auth !== null ? auth : {};
}

/** The refusals with codes of their own: mixed or unsupported locations, a principal over http. */
function rules(spec: SourceConnection): void {
  const ids = spec.locations.filter((l) => EXPERIMENT_ID.test(l));
  const schemas = spec.locations.filter(isSchema);
  if (ids.length > 0 && schemas.length > 0) {
    throw SourceErrors.SOURCE_LOCATIONS_MIXED(
      'a source reads either experiment ids or catalog schemas, not both: make two sources',
      {
        details: [{ path: 'spec.locations', message: 'mixes experiment ids and catalog schemas' }],
      },
    );
  }
  spec.locations.forEach((l, i) => {
    if (!EXPERIMENT_ID.test(l) && !isSchema(l)) {
      throw SourceErrors.SOURCE_UNSUPPORTED(
        `location "${l}" is not supported on databricks: use numeric experiment ids or catalog.schema`,
        {
          details: [
            {
              path: `spec.locations[${i}]`,
              message: 'experiment names and table prefixes are unsupported',
            },
          ],
        },
      );
    }
  });
  if (
    databricksAuth(spec).clientId !== undefined &&
    !spec.endpoint.toLowerCase().startsWith('https://')
  ) {
    throw SourceErrors.SOURCE_ENDPOINT_REFUSED(
      'a databricks service principal needs an https endpoint',
      {
        details: [
          { path: 'spec.endpoint', message: 'must be https with auth.databricks.clientId' },
        ],
      },
    );
  }
}

export const databricks = defineConnector({
  manifest: {
    type: 'mlflow',
    variant: 'databricks',
    description:
      'MLflow on Databricks: experiment ids, or catalog schemas through a SQL warehouse; a token or a service principal.',
    capabilities: ['list', 'fetch', 'write-back', 'long-running-search'],
    auth: {
      key: 'databricks',
      schema: z.strictObject({
        clientId: z.string().min(1).optional(),
        sqlWarehouseId: z.string().min(1).optional(),
      }),
    },
    rules,
    config: mlflowConnection((spec, issue) => {
      if (spec.locations.some(isSchema) && databricksAuth(spec).sqlWarehouseId === undefined) {
        issue(['auth', 'databricks', 'sqlWarehouseId'], 'required for catalog-schema locations');
      }
    }),
    defaults: MLFLOW_DEFAULTS,
  },
  create: (config, ctx) => {
    const { clientId, sqlWarehouseId } = databricksAuth(config);
    return createDatabricksConnector({
      endpoint: config.endpoint,
      locations: config.locations,
      http: ctx.http,
      ...(ctx.credential === undefined ? {} : { credential: ctx.credential }),
      ...(typeof clientId === 'string' ? { clientId } : {}),
      ...(typeof sqlWarehouseId === 'string' ? { sqlWarehouseId } : {}),
      ...(ctx.settings.pageSize === undefined ? {} : { pageSize: ctx.settings.pageSize }),
      maxAttributeBytes: ctx.settings.maxAttributeBytes,
    });
  },
});
