import { z } from 'zod';
import { defineConnector } from '../../connector.js';
import { MLFLOW_DEFAULTS, mlflowConnection } from './factory.js';

/** MLflow on Amazon SageMaker: the open-source calls, signed with SigV4 for the tracking server's ARN. */
export const sagemaker = defineConnector({
  manifest: {
    type: 'mlflow',
    variant: 'sagemaker',
    description: 'MLflow on Amazon SageMaker (SigV4-signed open-source API); not built yet.',
    capabilities: ['list', 'fetch', 'write-back'],
    auth: {
      key: 'sigv4',
      schema: z.strictObject({
        arn: z.string().regex(/^arn:[a-z-]+:sagemaker:/, 'a SageMaker ARN'),
      }),
    },
    config: mlflowConnection((spec, issue) => {
      if (spec.auth?.sigv4 === undefined) issue(['auth', 'sigv4', 'arn'], 'required for sagemaker');
    }),
    defaults: MLFLOW_DEFAULTS,
  },
});
