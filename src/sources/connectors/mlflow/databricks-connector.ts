import type { HttpClient } from '../../../net/index.js';
import type { TraceStoreConnector } from '../../connector.js';
import { bearerAuth, type MlflowAuth } from './auth.js';
import { createMlflowConnector } from './connector.js';
import { databricksArtifacts } from './databricks-artifacts.js';
import { servicePrincipalAuth } from './databricks-auth.js';
import { MlflowErrors } from './error-codes.js';
import { createUnityCatalogConnector, isCatalogSchema, type PollClock } from './unity-catalog.js';

/**
 * MLflow on Databricks: experiment locations read with the v3 API and spans downloaded from
 * cloud storage, or Unity Catalog schemas read with the v4 API through a SQL warehouse. The
 * credential is a personal access token or bearer token, or with `clientId` a service
 * principal's OAuth secret.
 */

export interface DatabricksConnectorOptions {
  endpoint: string;
  locations: readonly string[];
  http: HttpClient;
  credential?: string;
  clientId?: string;
  sqlWarehouseId?: string;
  pageSize?: number;
  maxAttributeBytes?: number;
  /** Largest trace artifact downloaded; larger traces are skipped with a reason. */
  maxArtifactBytes?: number;
  /** Time for token expiry and search polling; the system clock unless a test controls it. */
  clock?: PollClock;
}

function authOf(options: DatabricksConnectorOptions): MlflowAuth {
  if (options.clientId === undefined) return bearerAuth(() => options.credential);
  if (options.credential === undefined || options.credential === '') {
    throw MlflowErrors.MLFLOW_CREDENTIAL_INVALID(
      'a Databricks service principal (auth.databricks.clientId) needs its OAuth secret as the credential',
    );
  }
  return servicePrincipalAuth({
    endpoint: options.endpoint,
    clientId: options.clientId,
    secret: options.credential,
    http: options.http,
    ...(options.clock === undefined ? {} : { now: options.clock.now }),
  });
}

export function createDatabricksConnector(
  options: DatabricksConnectorOptions,
): TraceStoreConnector {
  const auth = authOf(options);
  const shared = {
    endpoint: options.endpoint,
    http: options.http,
    auth,
    ...(options.pageSize === undefined ? {} : { pageSize: options.pageSize }),
    ...(options.maxAttributeBytes === undefined
      ? {}
      : { maxAttributeBytes: options.maxAttributeBytes }),
  };
  if (options.locations.some(isCatalogSchema)) {
    return createUnityCatalogConnector({
      ...shared,
      locations: options.locations,
      sqlWarehouseId: options.sqlWarehouseId ?? '',
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
  }
  return createMlflowConnector({
    ...shared,
    locations: options.locations,
    product: 'Databricks',
    artifacts: databricksArtifacts(options.http, options.maxArtifactBytes),
  });
}
