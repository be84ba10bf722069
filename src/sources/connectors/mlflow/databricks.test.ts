import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DatabricksFake,
  type DatabricksFakeOptions,
} from '../../../../test/fakes/databricks/server.js';
import { connectorConformance } from '../../../../test/sources/conformance.js';
import { isTouchstoneError, type TouchstoneError } from '../../../core/index.js';
import { createHttpClient, createOutboundGuard } from '../../../net/index.js';
import type { TraceHeader, TraceStoreConnector } from '../../connector.js';
import { TOKEN_EARLY_MS } from './databricks-auth.js';
import {
  createDatabricksConnector,
  type DatabricksConnectorOptions,
} from './databricks-connector.js';
import { type PollClock, SEARCH_POLL_BUDGET_MS } from './unity-catalog.js';

/**
 * The Databricks variant against the contract fake workspace (test/fakes/databricks/), which
 * checks the token exchange (Basic client auth, form body), the bearer tokens, that artifact
 * downloads carry only the headers the workspace returned, and the v4 warehouse parameters.
 */

const T0 = Date.parse('2026-05-04T10:00:00.000Z');
const STARTS = [T0, T0 + 1_000, T0 + 1_000, T0 + 60_000, T0 + 3_600_000, T0 + 86_400_000];
const http = createHttpClient({ timeoutMs: 10_000 });
const fakes: DatabricksFake[] = [];

/** Time that passes only when told (token expiry, search polling). */
class TestClock implements PollClock {
  t = T0 + 2 * 86_400_000;
  now = () => this.t;
  sleep = async (ms: number) => {
    this.t += ms;
    await new Promise((resolve) => setImmediate(resolve));
  };
}

/** Real time, but polls without waiting (the conformance suite lists many pages). */
const quickPolls: PollClock = {
  now: () => Date.now(),
  sleep: () => new Promise((resolve) => setImmediate(resolve)),
};

async function started(options: DatabricksFakeOptions = {}) {
  const fake = await DatabricksFake.start(options);
  fakes.push(fake);
  return fake;
}

function seed(fake: DatabricksFake, location: string): { storeId: string; startMs: number }[] {
  if (!location.includes('.')) fake.addExperiment(location);
  return STARTS.map((startMs) => ({ storeId: fake.store.add(location, startMs).traceId, startMs }));
}

function readScores(fake: DatabricksFake) {
  return async (storeId: string) =>
    (fake.store.traces.get(storeId)?.assessments ?? []).map((a) => ({
      name: a.assessment_name,
      value: a.feedback?.value,
    }));
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

const window = { fromMs: T0, toMs: T0 + 2 * 86_400_000, pageSize: 100 };

afterAll(async () => {
  for (const f of fakes) expect(f.violations).toEqual([]);
  await http.close();
  for (const f of fakes) await f.close();
});

connectorConformance('Databricks experiments, personal access token (contract fake)', async () => {
  const fake = await started();
  const seeded = seed(fake, '1234');
  return {
    endpoint: fake.url,
    credential: fake.pat,
    connector: (endpoint, credential) =>
      createDatabricksConnector({ endpoint, locations: ['1234'], http, credential }),
    seeded: async () => seeded,
    readScores: readScores(fake),
  };
});

connectorConformance('Databricks experiments, service principal (contract fake)', async () => {
  const fake = await started();
  const seeded = seed(fake, '77');
  return {
    endpoint: fake.url,
    credential: fake.clientSecret,
    connector: (endpoint, credential) =>
      createDatabricksConnector({
        endpoint,
        locations: ['77'],
        http,
        credential,
        clientId: fake.clientId,
      }),
    seeded: async () => seeded,
    readScores: readScores(fake),
  };
});

connectorConformance(
  'Databricks Unity Catalog schema, service principal (contract fake)',
  async () => {
    const fake = await started();
    const seeded = seed(fake, 'main.agents');
    return {
      endpoint: fake.url,
      credential: fake.clientSecret,
      connector: (endpoint, credential) =>
        createDatabricksConnector({
          endpoint,
          locations: ['main.agents'],
          http,
          credential,
          clientId: fake.clientId,
          sqlWarehouseId: fake.sqlWarehouseId,
          clock: quickPolls,
        }),
      seeded: async () => seeded,
      readScores: readScores(fake),
      traceIds: /^main\.agents\/[0-9a-f]{32}$/,
    };
  },
);

describe('Databricks service principal credentials', () => {
  let fake: DatabricksFake;
  let clock: TestClock;
  const build = (over: Partial<DatabricksConnectorOptions> = {}): TraceStoreConnector =>
    createDatabricksConnector({
      endpoint: fake.url,
      locations: ['5'],
      http,
      credential: fake.clientSecret,
      clientId: fake.clientId,
      clock,
      ...over,
    });

  beforeAll(async () => {
    fake = await started();
    seed(fake, '5');
  });

  it('exchanges the secret at <endpoint>/oidc/v1/token and caches the token across connectors', async () => {
    clock = new TestClock();
    const before = fake.tokenRequests;
    // A connector per pull, as the manager builds them: one exchange for all.
    for (let pull = 0; pull < 3; pull++) {
      expect((await build().list(window)).traces).toHaveLength(STARTS.length);
    }
    expect(fake.tokenRequests - before).toBe(1);
    // Another secret is another cache entry (the fake refuses it: a clear error, no secret in it).
    const err = await caught(build({ credential: 'dose-wrong-secret-5d1c' }).list(window));
    expect(err).toMatchObject({ code: 'MLFLOW_TOKEN_REFUSED', retryable: false });
    expect(JSON.stringify(err) + err.message).not.toContain('dose-wrong-secret-5d1c');
    expect(fake.tokenRequests - before).toBe(2);
  });

  it('the token endpoint is the origin of the endpoint, whatever its path', async () => {
    clock = new TestClock();
    fake.setTokenLifetime(3600);
    // A fresh cache key: another client id the fake knows under the same secret.
    const seen = fake.seen.length;
    await caught(
      build({ endpoint: `${fake.url}/some/prefix`, clientId: 'other-client' }).list(window),
    );
    expect(fake.seen.slice(seen)[0]).toBe('POST /oidc/v1/token');
  });

  it('replaces the token one minute before it expires', async () => {
    clock = new TestClock();
    fake.setTokenLifetime(600);
    const connector = build({ clientId: fake.clientId, credential: fake.clientSecret });
    fake.revokeTokens();
    const before = fake.tokenRequests;
    await connector.list(window); // 401 with the cached token: one fresh token
    expect(fake.tokenRequests - before).toBe(1);
    clock.t += 600_000 - TOKEN_EARLY_MS - 1_000;
    await connector.list(window);
    expect(fake.tokenRequests - before).toBe(1);
    clock.t += 2_000;
    await connector.list(window);
    expect(fake.tokenRequests - before).toBe(2);
    fake.setTokenLifetime(3600);
  });

  it('a 401 gets exactly one fresh token; a second 401 is access denied', async () => {
    clock = new TestClock();
    const connector = build();
    await connector.list(window);
    fake.revokeTokens();
    const before = fake.tokenRequests;
    expect((await connector.list(window)).traces).toHaveLength(STARTS.length);
    expect(fake.tokenRequests - before).toBe(1);
    fake.rejectAll = true;
    try {
      const err = await caught(connector.list(window));
      expect(err).toMatchObject({ code: 'MLFLOW_ACCESS_DENIED', retryable: false });
      expect(err.message).toContain('401');
      expect(fake.tokenRequests - before).toBe(2);
    } finally {
      fake.rejectAll = false;
    }
  });

  it('a token endpoint answering HTML or a 500 fails with a clear, safe error', async () => {
    clock = new TestClock();
    const connector = build({ clientId: 'html-client' });
    fake.tokenFault = {
      status: 200,
      contentType: 'text/html',
      body: `<html>Sign in ${fake.clientSecret}</html>`,
    };
    try {
      const html = await caught(connector.list(window));
      expect(html).toMatchObject({ code: 'MLFLOW_BAD_RESPONSE' });
      expect(html.message).toContain('text/html');
      expect(html.message).not.toContain('<html');
      expect(html.message).not.toContain(fake.clientSecret);
      fake.tokenFault = { status: 500, contentType: 'text/html', body: '<html>oops</html>' };
      const down = await caught(connector.list(window));
      expect(down).toMatchObject({ code: 'MLFLOW_UNAVAILABLE', retryable: true });
    } finally {
      fake.tokenFault = undefined;
    }
  });

  it('a service principal without a secret is refused clearly', () => {
    expect(() =>
      createDatabricksConnector({ endpoint: fake.url, locations: ['5'], http, clientId: 'x' }),
    ).toThrow(expect.objectContaining({ code: 'MLFLOW_CREDENTIAL_INVALID' }));
  });
});

describe('Databricks experiment spans from cloud storage', () => {
  let fake: DatabricksFake;
  let headers: TraceHeader[];

  beforeAll(async () => {
    fake = await started();
    seed(fake, '9');
    headers = (
      await createDatabricksConnector({
        endpoint: fake.url,
        locations: ['9'],
        http,
        credential: fake.pat,
      }).list(window)
    ).traces;
  });

  it('downloads each artifact with only the returned headers, never the bearer token', async () => {
    const connector = createDatabricksConnector({
      endpoint: fake.url,
      locations: ['9'],
      http,
      credential: fake.pat,
    });
    const fetched = await connector.fetch(headers);
    for (const h of headers) {
      const got = fetched.get(h.storeId);
      expect(got && 'spans' in got ? got.spans.map((s) => s.name) : got).toEqual([
        'answer',
        'retrieve',
      ]);
    }
    expect(fake.downloads.length).toBeGreaterThanOrEqual(headers.length);
    for (const d of fake.downloads) {
      expect(d.authorization).toBeUndefined();
      expect(d.headers['x-amz-server-side-encryption']).toBe('aws:kms');
      expect(JSON.stringify(d.headers)).not.toContain(fake.pat);
    }
  });

  it('a signed URI to a private address is refused by the outbound guard; the trace is skipped', async () => {
    const guarded = createHttpClient({
      timeoutMs: 10_000,
      ...createOutboundGuard({
        allowHosts: ['127.0.0.1'],
        requireHttps: true,
        setting: 'sources.allow_hosts',
      }),
    });
    fake.signedUriOverride = 'http://10.1.2.3:9000';
    const downloads = fake.downloads.length;
    try {
      const connector = createDatabricksConnector({
        endpoint: fake.url,
        locations: ['9'],
        http: guarded,
        credential: fake.pat,
      });
      const fetched = await connector.fetch(headers.slice(0, 2));
      for (const h of headers.slice(0, 2)) {
        expect(fetched.get(h.storeId)).toEqual({
          missing: expect.stringContaining('refused by the outbound rules'),
        });
      }
      expect(fake.downloads.length).toBe(downloads);
    } finally {
      fake.signedUriOverride = undefined;
      await guarded.close();
    }
  });

  it('a 200 MB artifact is refused past the size cap; the other traces are read', async () => {
    const [big, small] = headers;
    const stored = fake.store.traces.get(big?.storeId as string);
    if (stored === undefined || small === undefined) throw new Error('seeded');
    stored.artifactBytes = 200 * 1024 * 1024;
    try {
      const connector = createDatabricksConnector({
        endpoint: fake.url,
        locations: ['9'],
        http,
        credential: fake.pat,
      });
      const fetched = await connector.fetch(
        [stored, small].map((_, i) => headers[i] as TraceHeader),
      );
      expect(fetched.get(stored.traceId)).toEqual({
        missing: `the trace artifact is larger than ${10 * 1024 * 1024} bytes`,
      });
      expect(fetched.get(small.storeId)).toHaveProperty('spans');
    } finally {
      delete stored.artifactBytes;
    }
  });
});

describe('Databricks Unity Catalog search', () => {
  it('a search that takes six minutes stops after five and is retried next pull', async () => {
    const clock = new TestClock();
    const fake = await started({ now: () => clock.now() });
    seed(fake, 'main.agents');
    fake.searchDurationMs = 6 * 60_000;
    const build = () =>
      createDatabricksConnector({
        endpoint: fake.url,
        locations: ['main.agents'],
        http,
        credential: fake.pat,
        sqlWarehouseId: fake.sqlWarehouseId,
        clock,
      });
    const began = clock.now();
    const err = await caught(build().list(window));
    expect(err).toMatchObject({ code: 'MLFLOW_SEARCH_TIMEOUT', retryable: true });
    expect(clock.now() - began).toBeGreaterThanOrEqual(SEARCH_POLL_BUDGET_MS);
    expect(clock.now() - began).toBeLessThan(SEARCH_POLL_BUDGET_MS + 10_000);
    // The next pull (a new connector) searches again; the warehouse is warm now.
    fake.searchDurationMs = 60_000;
    const page = await build().list(window);
    expect(page.traces.map((h) => h.traceId)).toEqual(
      [...fake.store.traces.values()]
        .sort((a, b) => a.startMs - b.startMs || a.traceId.localeCompare(b.traceId))
        .map((t) => `main.agents/${t.hex}`),
    );
  });

  it('a catalog schema without a warehouse is refused by the workspace', async () => {
    const fake = await started();
    seed(fake, 'main.agents');
    const connector = createDatabricksConnector({
      endpoint: fake.url,
      locations: ['main.agents'],
      http,
      credential: fake.pat,
      sqlWarehouseId: 'wrong-warehouse',
      clock: quickPolls,
    });
    const err = await caught(connector.list(window));
    expect(err).toMatchObject({ code: 'MLFLOW_REQUEST_REFUSED' });
    expect(err.message).toContain('INVALID_PARAMETER_VALUE');
  });
});
