import type { ConnectorFactory } from '../connector.js';
import { langfuse } from './langfuse/factory.js';
import { databricks } from './mlflow/databricks.js';
import { azureml, mlflow } from './mlflow/factory.js';
import { sagemaker } from './mlflow/sagemaker.js';
import { phoenix } from './phoenix/factory.js';
import { ConnectorRegistry } from './registry.js';

/**
 * The connectors this build declares, in one static list (the order is the order the resource
 * schema lists types and variants in). A new store or variant is one more declaration here.
 */
export const CONNECTOR_FACTORIES: readonly ConnectorFactory[] = [
  mlflow,
  phoenix,
  langfuse,
  databricks,
  sagemaker,
  azureml,
];

export const BUILTIN_CONNECTORS = new ConnectorRegistry(CONNECTOR_FACTORIES);

/** The built-in declaration of a pair when this build creates it (the composition root's lookup). */
export function findConnector(type: string, variant: string | undefined) {
  return BUILTIN_CONNECTORS.find(type, variant);
}

export { type ConnectorBuilder, ConnectorRegistry, refusedVariant } from './registry.js';
