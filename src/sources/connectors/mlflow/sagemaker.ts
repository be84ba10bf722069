import { z } from 'zod';
import { defineConnector, type SourceConnection } from '../../connector.js';
import { SourceErrors } from '../../error-codes.js';
import { createMlflowConnector } from './connector.js';
import { MLFLOW_DEFAULTS, mlflowConnection } from './factory.js';
import {
  ARN_FORM,
  isProviderHost,
  parseAwsCredential,
  parseSageMakerArn,
  sigV4Auth,
} from './sagemaker-auth.js';

/**
 * MLflow on Amazon SageMaker: the open-source calls, signed with SigV4 for the tracking server's
 * (or app's) ARN, sent only to the provider's own hosts for the ARN's region.
 */

function arnOf(spec: Pick<SourceConnection, 'auth'>): string | undefined {
  const sigv4 = spec.auth?.sigv4;
  return typeof sigv4 === 'object' &&
    sigv4 !== null &&
    'arn' in sigv4 &&
    typeof sigv4.arn === 'string'
    ? sigv4.arn
    : undefined;
}

/** The signature goes only to the provider's own https hosts for the ARN's region. */
function rules(spec: SourceConnection): void {
  const arn = parseSageMakerArn(arnOf(spec) ?? '');
  if (arn === undefined) return; // reported by the schema
  let url: URL | undefined;
  try {
    url = new URL(spec.endpoint);
  } catch {
    url = undefined;
  }
  if (url === undefined || url.protocol !== 'https:' || !isProviderHost(url.hostname, arn)) {
    throw SourceErrors.SOURCE_ENDPOINT_REFUSED(
      `a sagemaker endpoint must be an https host of SageMaker's own domains for region ${arn.region}`,
      {
        details: [
          {
            path: 'spec.endpoint',
            message:
              arn.resource === 'mlflow-tracking-server'
                ? `use https://${arn.region}.experiments.sagemaker.aws or a VPC endpoint in ${arn.region}`
                : `use the app's https host under ${arn.region}.app.aws or a VPC endpoint in ${arn.region}`,
          },
        ],
      },
    );
  }
}

export const sagemaker = defineConnector({
  manifest: {
    type: 'mlflow',
    variant: 'sagemaker',
    description:
      'MLflow on Amazon SageMaker (SigV4-signed open-source API, tracking servers and apps).',
    capabilities: ['list', 'fetch', 'write-back'],
    auth: {
      key: 'sigv4',
      schema: z.strictObject({
        arn: z
          .string()
          .refine((a) => parseSageMakerArn(a) !== undefined, `an ARN of the form ${ARN_FORM}`),
      }),
    },
    rules,
    config: mlflowConnection((spec, issue) => {
      if (spec.auth?.sigv4 === undefined) issue(['auth', 'sigv4', 'arn'], 'required for sagemaker');
    }),
    defaults: MLFLOW_DEFAULTS,
  },
  create: (config, ctx) => {
    const arn = parseSageMakerArn(arnOf(config) ?? '');
    if (arn === undefined) throw new Error('a parsed sagemaker source has a valid ARN');
    return createMlflowConnector({
      endpoint: config.endpoint,
      locations: config.locations,
      http: ctx.http,
      product: 'SageMaker MLflow',
      auth: sigV4Auth({ arn, credential: parseAwsCredential(ctx.credential) }),
      ...(ctx.settings.pageSize === undefined ? {} : { pageSize: ctx.settings.pageSize }),
      maxAttributeBytes: ctx.settings.maxAttributeBytes,
    });
  },
});
