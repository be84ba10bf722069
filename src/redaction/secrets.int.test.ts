import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpanStatusCode } from '@opentelemetry/api';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { protobufBody, recordSpans } from '../../test/support/otel.js';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';

/**
 * Credentials in free text through the real OTLP door (SQLite, and PostgreSQL when configured):
 * the secret detectors, on by default, redact them before the spans are stored, so the stored
 * spans and record, the policy selectors and the evaluators never see them.
 */

const SECRETS = {
  apiKey: 'K9xQ2mZ7vB4nL8wR',
  bearer: 'Tk5pW3sD9fH2jK7lM4nB',
  curlPassword: 'Cu7rLpAsS',
  dsnPassword: 'Ds9nP4ssW0rd',
  pem: 'MIIEowIBAAKCAQEA7pEmSeNtInEl',
  jwtSignature: 'SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c',
  github: 'aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789',
};
const JWT = `eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.${SECRETS.jwtSignature}`;

function leakyTrace(): { traceId: string; body: Buffer } {
  let traceId = '';
  const spans = recordSpans({ 'service.name': 'deployer' }, (tracer) => {
    tracer.startActiveSpan(
      'invoke_agent deployer',
      {
        attributes: {
          'openinference.span.kind': 'AGENT',
          'http.url': `https://api.example.com/v1/items?api_key=${SECRETS.apiKey}&page=2`,
          'input.value': `Deploy with: curl -u deploy:${SECRETS.curlPassword} -H "Authorization: Bearer ${SECRETS.bearer}" https://ci.example.com`,
          'output.value': `Done. Session ${JWT}; key:\n-----BEGIN RSA PRIVATE KEY-----\n${SECRETS.pem}\n-----END RSA PRIVATE KEY-----`,
          'git.command': `git push https://x-access-token:ghp_${SECRETS.github}@github.com/acme/app`,
        },
      },
      (root) => {
        traceId = root.spanContext().traceId;
        root.addEvent('exception', {
          'exception.type': 'OperationalError',
          'exception.stacktrace': `Traceback (most recent call last):\n  File "/app/db.py", line 12\nOperationalError: postgres://app:${SECRETS.dsnPassword}@db.internal:5432/orders`,
        });
        root.setStatus({
          code: SpanStatusCode.ERROR,
          message: `POST https://ci.example.com/deploy answered 401 to Bearer ${SECRETS.bearer}`,
        });
        root.end();
      },
    );
  });
  return { traceId, body: protobufBody(spans) };
}

function policy(name: string, spec: Record<string, unknown>) {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'OnlineEvalPolicy',
    metadata: { name },
    spec,
  };
}

describe.each(storeVariants())('secret detectors through OTLP ingest on $name', (variant) => {
  const clock = new FakeClock(Date.parse('2026-11-22T10:00:00Z'));
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-secrets-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        traces: { completion_grace: '2s' },
        ...store.overrides,
      },
    });
    app = await createApp(config, {
      env: {},
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
  });
  afterEach(async () => {
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stores the spans and the record without the secrets, and no selector or evaluator sees them', async () => {
    const evaluators = [
      {
        name: 'sees-jwt',
        ref: 'contains',
        params: { value: SECRETS.jwtSignature, caseSensitive: true },
      },
      { name: 'sees-pem', ref: 'contains', params: { value: SECRETS.pem, caseSensitive: true } },
      { name: 'sees-redacted', ref: 'contains', params: { value: '[REDACTED]' } },
    ];
    await app.policies.apply(
      OPEN_PRINCIPAL,
      policy('selects-on-secret', {
        selector: `attributes["http.url"].contains("${SECRETS.apiKey}") || attributes["input.value"].contains("${SECRETS.bearer}")`,
        stages: [{ evaluators: [{ ref: 'step-budget' }] }],
      }),
    );
    await app.policies.apply(
      OPEN_PRINCIPAL,
      policy('selects-on-redacted', {
        selector: 'attributes["http.url"].contains("api_key=[REDACTED]&page=2")',
        stages: [{ evaluators }],
      }),
    );

    const { traceId, body } = leakyTrace();
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: body,
      headers: { 'content-type': 'application/x-protobuf' },
    });
    expect(res.statusCode).toBe(200);
    clock.advance(2500);
    await app.completer.tick();
    await app.engine.tick();

    const spans = JSON.stringify(await app.store.traces.spans('default', traceId));
    const stored = JSON.stringify(await app.store.traces.get('default', traceId));
    const scores = (await app.server.inject({ url: `/v1alpha1/traces/${traceId}/scores` })).body;
    for (const secret of Object.values(SECRETS)) {
      expect(spans).not.toContain(secret);
      expect(stored).not.toContain(secret);
      expect(scores).not.toContain(secret);
    }
    // Only the secrets went: their context stays readable.
    expect(spans).toContain('api_key=[REDACTED]&page=2');
    expect(spans).toContain('curl -u deploy:[REDACTED] -H \\"Authorization: Bearer [REDACTED]\\"');
    expect(spans).toContain('postgres://app:[REDACTED]@db.internal:5432/orders');
    expect(spans).toContain(
      '-----BEGIN RSA PRIVATE KEY-----\\n[REDACTED]\\n-----END RSA PRIVATE KEY-----',
    );
    expect(spans).toContain('https://x-access-token:[REDACTED]@github.com/acme/app');
    expect(spans).toContain('answered 401 to Bearer [REDACTED]');

    const results = (
      JSON.parse(scores) as {
        results: Record<string, { evaluator: string; scores: { passed?: boolean }[] }[]>;
      }
    ).results;
    expect(Object.keys(results)).toEqual(['selects-on-redacted']);
    const passed = Object.fromEntries(
      results['selects-on-redacted']!.map((r) => [r.evaluator, r.scores[0]?.passed]),
    );
    expect(passed).toEqual({
      'sees-jwt': false,
      'sees-pem': false,
      'sees-redacted': true,
    });
  });
});
