import { z } from 'zod';
import { defineConnector, type SourceConnection } from '../../connector.js';
import { refusedVariant } from '../registry.js';
import { createMlflowConnector, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './connector.js';

/**
 * The MLflow declarations: the open-source server, and what every variant shares (at least one
 * experiment). A variant (Databricks, SageMaker) is a declaration of its own beside this one.
 */

export const MLFLOW_DEFAULTS = { pageSize: DEFAULT_PAGE_SIZE, maxPageSize: MAX_PAGE_SIZE };

/**
 * The connection of an MLflow source of any flavour: `more` adds a variant's rules between
 * fields (as issues, so they are reported together with the shared ones).
 */
export function mlflowConnection(
  more?: (
    spec: SourceConnection,
    issue: (path: (string | number)[], message: string) => void,
  ) => void,
) {
  return z
    .looseObject({
      connector: z.string(),
      endpoint: z.string(),
      locations: z.array(z.string()),
      auth: z.record(z.string(), z.unknown()).optional(),
    })
    .superRefine((spec, ctx) => {
      const issue = (path: (string | number)[], message: string) =>
        ctx.addIssue({ code: 'custom', path, message });
      if (spec.locations.length === 0) {
        issue(['locations'], 'name at least one experiment (name or id)');
      }
      more?.(spec, issue);
    })
    .transform((spec) => ({
      endpoint: spec.endpoint,
      locations: spec.locations,
      auth: spec.auth ?? {},
    }));
}

export const mlflow = defineConnector({
  manifest: {
    type: 'mlflow',
    description: 'Open-source MLflow 3.x (v3 trace API); experiments by name or id.',
    capabilities: ['list', 'fetch', 'write-back'],
    config: mlflowConnection(),
    defaults: MLFLOW_DEFAULTS,
  },
  create: (config, ctx) =>
    createMlflowConnector({
      endpoint: config.endpoint,
      locations: config.locations,
      http: ctx.http,
      ...(ctx.credential === undefined ? {} : { token: () => ctx.credential }),
      ...(ctx.settings.pageSize === undefined ? {} : { pageSize: ctx.settings.pageSize }),
      maxAttributeBytes: ctx.settings.maxAttributeBytes,
    }),
});

export const azureml = refusedVariant(
  'mlflow',
  'azureml',
  'Azure Machine Learning sources are refused',
);
