import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  SageMakerFake,
  type SageMakerFakeOptions,
} from '../../../../test/fakes/sagemaker/server.js';
import { connectorConformance } from '../../../../test/sources/conformance.js';
import { isTouchstoneError, type TouchstoneError } from '../../../core/index.js';
import { createHttpClient } from '../../../net/index.js';
import { DEFAULT_CONNECTOR_SETTINGS, type TraceStoreConnector } from '../../connector.js';
import { sagemaker } from './sagemaker.js';
import { parseSageMakerArn, sigV4Auth } from './sagemaker-auth.js';

/**
 * The SageMaker variant against the contract fake endpoint (test/fakes/sagemaker/), which
 * recomputes every request's Signature Version 4 on its own and checks the routing header; and
 * one signature cross-checked with botocore when the Python interop environment is there.
 */

const T0 = Date.parse('2026-05-04T10:00:00.000Z');
const STARTS = [T0, T0 + 1_000, T0 + 1_000, T0 + 60_000, T0 + 3_600_000, T0 + 86_400_000];
const TRACKING_ARN = 'arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/agents';
const APP_ARN = 'arn:aws:sagemaker:eu-west-1:123456789012:mlflow-app/app-7f3';
const KEY = {
  accessKeyId: 'ASIAEXAMPLECONFIGURED',
  secretAccessKey: 'sm-secret-sentinel-7d2e9c0b5a',
  sessionToken: 'sm-session-token-sentinel-41f8',
};
const CREDENTIAL = JSON.stringify({
  access_key_id: KEY.accessKeyId,
  secret_access_key: KEY.secretAccessKey,
  session_token: KEY.sessionToken,
});
const http = createHttpClient({ timeoutMs: 10_000 });
const fakes: SageMakerFake[] = [];
const window = { fromMs: T0, toMs: T0 + 2 * 86_400_000, pageSize: 100 };

function trackingFake(): Promise<SageMakerFake> {
  return started({
    arn: TRACKING_ARN,
    region: 'us-east-1',
    service: 'sagemaker-mlflow',
    routingHeader: 'x-mlflow-sm-tracking-server-arn',
    ...KEY,
  });
}

async function started(options: SageMakerFakeOptions): Promise<SageMakerFake> {
  const fake = await SageMakerFake.start(options);
  fakes.push(fake);
  return fake;
}

function seed(fake: SageMakerFake, experiment = 'agent runs') {
  fake.addExperiment('3', experiment);
  return STARTS.map((startMs) => ({
    storeId: fake.store.add('3', startMs, {
      tags: { 'mlflow.traceName': 'answer', 'mlflow.trace.spansLocation': 'TRACKING_STORE' },
    }).traceId,
    startMs,
  }));
}

/** The connector as the server builds it: the declaration's config and create. */
function build(
  fake: SageMakerFake,
  endpoint: string,
  credential: string | undefined,
  arn = TRACKING_ARN,
  locations = ['agent runs'],
): TraceStoreConnector {
  fake.signedHost = new URL(endpoint).host;
  const config = sagemaker.manifest.config.parse({
    connector: 'mlflow',
    variant: 'sagemaker',
    endpoint,
    locations,
    auth: { sigv4: { arn } },
  });
  const create = sagemaker.create;
  if (create === undefined) throw new Error('sagemaker is built');
  return create(config, {
    http,
    settings: DEFAULT_CONNECTOR_SETTINGS,
    ...(credential === undefined ? {} : { credential }),
  });
}

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

afterAll(async () => {
  for (const f of fakes) expect(f.violations).toEqual([]);
  await http.close();
  for (const f of fakes) await f.close();
});

connectorConformance('SageMaker tracking server, SigV4 (contract fake)', async () => {
  const fake = await trackingFake();
  const seeded = seed(fake);
  return {
    endpoint: fake.url,
    credential: CREDENTIAL,
    connector: (endpoint, credential) => build(fake, endpoint, credential),
    seeded: async () => seeded,
    readScores: async (storeId) =>
      (fake.store.traces.get(storeId)?.assessments ?? []).map((a) => ({
        name: a.assessment_name,
        value: a.feedback?.value,
      })),
  };
});

describe('SageMaker signing', () => {
  let fake: SageMakerFake;
  beforeAll(async () => {
    fake = await trackingFake();
    seed(fake);
  });

  it('signs for the ARN: tracking-server name and header; spaces in the query as %20', async () => {
    const connector = build(fake, fake.url, CREDENTIAL);
    await connector.check();
    const page = await connector.list(window);
    expect(page.traces).toHaveLength(STARTS.length);
    const fetched = await connector.fetch(page.traces);
    expect([...fetched.values()].every((f) => 'spans' in f)).toBe(true);
    expect(fake.refused).toEqual([]);
  });

  it('an app ARN signs as sagemaker with the app routing header', async () => {
    const app = await started({
      arn: APP_ARN,
      region: 'eu-west-1',
      service: 'sagemaker',
      routingHeader: 'x-sm-mlflow-app-arn',
      ...KEY,
    });
    seed(app);
    const page = await build(app, app.url, CREDENTIAL, APP_ARN).list(window);
    expect(page.traces).toHaveLength(STARTS.length);
    expect(app.refused).toEqual([]);
  });

  it('ignores an ambient AWS_* environment: only the source credential signs', async () => {
    const saved = { ...process.env };
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: 'AKIAAMBIENTENVIRONMENT',
      AWS_SECRET_ACCESS_KEY: 'ambient-secret',
      AWS_SESSION_TOKEN: 'ambient-token',
      AWS_REGION: 'ap-south-1',
      AWS_DEFAULT_REGION: 'ap-south-1',
      AWS_PROFILE: 'ambient',
      AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://169.254.170.23/v1/credentials',
      AWS_WEB_IDENTITY_TOKEN_FILE: '/nonexistent/token',
    });
    try {
      const refused = fake.refused.length;
      expect((await build(fake, fake.url, CREDENTIAL).list(window)).traces).toHaveLength(
        STARTS.length,
      );
      expect(fake.refused.length).toBe(refused);
      // Without a credential there is no fallback to the environment or an instance role.
      expect(() => build(fake, fake.url, undefined)).toThrow(
        expect.objectContaining({ code: 'MLFLOW_CREDENTIAL_INVALID' }),
      );
    } finally {
      process.env = saved;
    }
  });

  it('a credential of the wrong form is refused without echoing it', () => {
    for (const bad of ['AKIA:secret', '{"access_key_id":"AKIA"}', '[]', '']) {
      try {
        build(fake, fake.url, bad);
        throw new Error('expected a refusal');
      } catch (err) {
        expect(err).toMatchObject({ code: 'MLFLOW_CREDENTIAL_INVALID' });
        if (bad !== '') expect(String((err as Error).message)).not.toContain(bad);
      }
    }
  });

  it('a wrong secret is access denied, with no secret in the error', async () => {
    const wrong = JSON.stringify({
      access_key_id: KEY.accessKeyId,
      secret_access_key: 'sm-wrong-secret-3b1d',
    });
    const err = await caught(build(fake, fake.url, wrong).list(window));
    expect(err).toMatchObject({ code: 'MLFLOW_ACCESS_DENIED', retryable: false });
    expect(err.message).toContain('SageMaker MLflow');
    expect(err.message + JSON.stringify(err)).not.toContain('sm-wrong-secret-3b1d');
    fake.violations.splice(0); // the fake rightly recorded the bad signature
  });
});

const PYTHON = process.env.TOUCHSTONE_INTEROP_MOTO_PYTHON;

describe.skipIf(PYTHON === undefined)('SageMaker signature cross-checked with botocore', () => {
  it('botocore computes the same signature for the same request', async () => {
    const arn = parseSageMakerArn(TRACKING_ARN);
    if (arn === undefined) throw new Error('valid ARN');
    const auth = sigV4Auth({
      arn,
      credential: KEY,
      now: () => Date.parse('2026-05-04T10:11:12Z'),
    });
    const body = '{"locations":[{"type":"MLFLOW_EXPERIMENT"}],"filter":"a b"}';
    const signed = await auth.sign({
      method: 'POST',
      url: 'https://us-east-1.experiments.sagemaker.aws/api/3.0/mlflow/traces/search?x=a+b&trace_ids=1&trace_ids=0',
      headers: { accept: 'application/json', 'content-type': 'application/json' },
      body,
    });
    const authorization = signed.headers.authorization ?? '';
    const signedNames = /SignedHeaders=([^,]+)/.exec(authorization)?.[1]?.split(';') ?? [];
    const headers: Record<string, string> = { host: 'us-east-1.experiments.sagemaker.aws' };
    for (const [k, v] of Object.entries(signed.headers)) {
      if (signedNames.includes(k.toLowerCase())) headers[k.toLowerCase()] = v;
    }
    const script = `
import json, sys
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
i = json.load(sys.stdin)
req = AWSRequest(method='POST', url=i['url'], data=i['body'].encode(), headers=i['headers'])
req.context['timestamp'] = i['headers']['x-amz-date']
auth = SigV4Auth(Credentials(i['key'], i['secret'], i['token']), 'sagemaker-mlflow', 'us-east-1')
cr = auth.canonical_request(req)
print(auth.signature(auth.string_to_sign(req, cr), req))
`;
    const out = spawnSync(PYTHON as string, ['-c', script], {
      input: JSON.stringify({
        url: signed.url,
        body,
        headers,
        key: KEY.accessKeyId,
        secret: KEY.secretAccessKey,
        token: KEY.sessionToken,
      }),
      encoding: 'utf8',
    });
    expect(out.stderr).toBe('');
    expect(authorization).toContain(`Signature=${out.stdout.trim()}`);
    expect(signed.url).toContain('x=a%20b');
  });
});
