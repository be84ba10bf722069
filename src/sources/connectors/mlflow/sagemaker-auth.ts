import { createHash } from 'node:crypto';
import { awsSigner } from '../../../net/index.js';
import { isRecord } from '../json-rest.js';
import type { MlflowAuth } from './auth.js';
import { MlflowErrors } from './error-codes.js';

/**
 * SageMaker managed MLflow: every request signed with Signature Version 4 using the source's own
 * credential (never the service's cloud identity or the process environment), for the signing
 * name and region of `auth.sigv4.arn`, with the ARN in the routing header the server routes on.
 * The signing details follow the `sagemaker-mlflow` plugin: the payload hash is a signed header,
 * `Connection` is not signed, and spaces in the query are `%20`.
 */

export type SageMakerResource = 'mlflow-tracking-server' | 'mlflow-app';

export interface SageMakerArn {
  arn: string;
  partition: string;
  region: string;
  resource: SageMakerResource;
}

const ARN =
  /^arn:(aws|aws-us-gov):sagemaker:([a-z]{2}(?:-[a-z]+)+-\d+):(\d{12}):(mlflow-tracking-server|mlflow-app)\/[A-Za-z0-9-]+$/;

/** The ARN's parts; undefined when it is not a tracking-server or app ARN. */
export function parseSageMakerArn(arn: string): SageMakerArn | undefined {
  const m = ARN.exec(arn);
  if (m === null) return undefined;
  return {
    arn,
    partition: m[1] as string,
    region: m[2] as string,
    resource: m[4] as SageMakerResource,
  };
}

export const ARN_FORM =
  'arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name> (or mlflow-app/<name>)';

/** The signing service name: the tracking-server one, or SageMaker's own for an app. */
export function signingName(arn: SageMakerArn): string {
  return arn.resource === 'mlflow-tracking-server' ? 'sagemaker-mlflow' : 'sagemaker';
}

export function routingHeader(arn: SageMakerArn): string {
  return arn.resource === 'mlflow-tracking-server'
    ? 'x-mlflow-sm-tracking-server-arn'
    : 'x-sm-mlflow-app-arn';
}

function escaped(region: string): string {
  return region.replace(/[.-]/g, (c) => `\\${c}`);
}

/**
 * Whether `host` is one of the provider's own hosts for the ARN's region, so a signature goes
 * nowhere else: `<region>.experiments.sagemaker.aws` (tracking servers), `<host>.<region>.app.aws`
 * (apps), or an interface VPC endpoint `vpce-….<region>.vpce.amazonaws.com`.
 */
export function isProviderHost(host: string, arn: SageMakerArn): boolean {
  const h = host.toLowerCase();
  const r = escaped(arn.region);
  const own =
    arn.resource === 'mlflow-tracking-server'
      ? new RegExp(`^${r}\\.experiments\\.sagemaker\\.aws$`)
      : new RegExp(`^(?:[a-z0-9-]+\\.)+${r}\\.app\\.aws$`);
  const vpce = new RegExp(`^vpce-[a-z0-9-]+(?:\\.[a-z0-9-]+)*\\.${r}\\.vpce\\.amazonaws\\.com$`);
  return own.test(h) || vpce.test(h);
}

export interface AwsCredential {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** The credential's JSON object; never echoes any part of it. */
export function parseAwsCredential(value: string | undefined): AwsCredential {
  let json: unknown;
  try {
    json = value === undefined ? undefined : JSON.parse(value);
  } catch {
    json = undefined;
  }
  const id = isRecord(json) ? json.access_key_id : undefined;
  const secret = isRecord(json) ? json.secret_access_key : undefined;
  const token = isRecord(json) ? json.session_token : undefined;
  if (
    typeof id !== 'string' ||
    id === '' ||
    typeof secret !== 'string' ||
    secret === '' ||
    (token !== undefined && typeof token !== 'string')
  ) {
    throw MlflowErrors.MLFLOW_CREDENTIAL_INVALID(
      'the SageMaker credential must be a JSON object with access_key_id, secret_access_key and optionally session_token',
    );
  }
  return {
    accessKeyId: id,
    secretAccessKey: secret,
    ...(typeof token === 'string' && token !== '' ? { sessionToken: token } : {}),
  };
}

export interface SigV4Options {
  arn: SageMakerArn;
  credential: AwsCredential;
  /** Epoch ms of the signing date; the system clock unless a test controls it. */
  now?: () => number;
}

/** The query of a URL as the signer takes it (repeated keys as arrays). */
function queryOf(url: URL): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [key, value] of url.searchParams) {
    const had = query[key];
    query[key] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
  }
  return query;
}

export function sigV4Auth(options: SigV4Options): MlflowAuth {
  const { arn, credential } = options;
  const now = options.now ?? Date.now;
  let signer: ReturnType<typeof awsSigner> | undefined;
  return {
    async sign(request) {
      // URLSearchParams writes a space as `+`, which the signature's canonical query would read
      // as a plus sign: `%20` on the wire, as the plugin sends.
      const url = new URL(request.url.replace(/\+/g, '%20'));
      const body = request.body ?? '';
      const headers: Record<string, string> = {
        ...request.headers,
        host: url.host,
        [routingHeader(arn)]: arn.arn,
        // Signed, as the plugin sends it: the server checks the body against it.
        'x-amz-content-sha256': createHash('sha256').update(body).digest('hex'),
      };
      signer ??= awsSigner({
        service: signingName(arn),
        region: arn.region,
        credentials: credential,
        uriEscapePath: true,
      });
      const signed = await (await signer).sign(
        {
          method: request.method,
          protocol: url.protocol,
          hostname: url.hostname,
          ...(url.port === '' ? {} : { port: Number(url.port) }),
          path: url.pathname,
          query: queryOf(url),
          headers,
          ...(request.body === undefined ? {} : { body: request.body }),
        },
        { signingDate: new Date(now()) },
      );
      const sent: Record<string, string> = {};
      for (const [name, value] of Object.entries(signed.headers)) {
        // The HTTP client sets Host itself, to the value that was signed.
        if (name.toLowerCase() !== 'host') sent[name] = value;
      }
      return { headers: sent, url: url.toString() };
    },
  };
}
