import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MOTO_PYTHON,
  MOTO_SKIP_REASON,
  type MotoServer,
  startMotoServer,
} from '../../test/interop/moto/moto-server.js';
import { type TestApp, testApp } from '../../test/support/app.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';

/**
 * A dataset root in an S3-compatible bucket, against moto's real server with SigV4 checked, and
 * boto3 reading back what Touchstone wrote: publish, reject (nothing at the final key), import
 * from incoming/<project>/, refusals, tampering, bad credentials.
 */

if (MOTO_PYTHON === undefined) {
  describe('S3 dataset root against moto', () => {
    if (process.env.CI === 'true') {
      it('needs TOUCHSTONE_INTEROP_MOTO_PYTHON under CI', () => {
        throw new Error(MOTO_SKIP_REASON);
      });
    } else {
      it.skip(`skipped: ${MOTO_SKIP_REASON}`, () => {});
    }
  });
}

const BUCKET = 'touchstone-datasets';
const SECRET = 'sk-live-S3-ROW-71c2';

describe.skipIf(MOTO_PYTHON === undefined)('S3 dataset root against moto', () => {
  let moto: MotoServer;
  let t: TestApp;
  const scratch = mkdtempSync(join(tmpdir(), 'touchstone-s3-'));

  const rootConfig = (overrides: Record<string, unknown> = {}) => ({
    datasets: {
      root: `s3://${BUCKET}/team`,
      s3: {
        endpoint: moto.endpoint,
        region: 'us-east-1',
        access_key_id: { env: 'DATASET_S3_KEY' },
        secret_access_key: { env: 'DATASET_S3_SECRET' },
        ...overrides,
      },
    },
  });
  const list = async (prefix: string) =>
    JSON.parse((await moto.admin(['list', BUCKET, prefix])).trim()) as string[];
  const upload = (body: string | Buffer, query = '?project=p1') =>
    t.app.server.inject({
      method: 'POST',
      url: `/v1alpha1/datasets/evals/upload${query}`,
      payload: body,
      headers: { 'content-type': 'application/octet-stream' },
    });

  beforeAll(async () => {
    moto = await startMotoServer(MOTO_PYTHON as string, BUCKET);
    t = await testApp(rootConfig(), {
      DATASET_S3_KEY: moto.accessKeyId,
      DATASET_S3_SECRET: moto.secretAccessKey,
    });
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await moto?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('publishes an upload as one object under <prefix>/datasets/, readable by boto3 and by runs', async () => {
    const res = await upload('{"input":"2+2?","output":"4","reference":"4"}\n{"input":"b"}\n');
    expect(res.statusCode).toBe(200);
    const { path, sha256, records } = res.json();
    expect(records).toBe(2);
    expect(await list('team/datasets/')).toEqual([`team/${path}`]);
    const stored = await moto.admin(['get', BUCKET, `team/${path}`]);
    expect(createHash('sha256').update(stored).digest('hex')).toBe(sha256);
    expect(await t.app.datasets.read('p1', path)).toEqual([
      { id: '1', input: '2+2?', output: '4', reference: '4' },
      { id: '2', input: 'b' },
    ]);
  });

  it('pages the records of the last uploaded content from the bucket', async () => {
    const res = await upload('{"input":"x"}\n{"input":"y"}\n{"input":"z"}\n', '?project=listed');
    expect(res.statusCode).toBe(200);
    const { path } = res.json();
    const page = await t.app.server.inject({
      url: '/v1alpha1/datasets/evals/records?project=listed&page_size=2',
    });
    expect(page.json()).toMatchObject({
      path,
      total: 3,
      records: [{ input: 'x' }, { input: 'y' }],
    });
  });

  it('leaves nothing at any final key when the upload is rejected', async () => {
    const before = await list('team/datasets/');
    const res = await upload(`{"input":"a"}\n{"input":"b","api_key":"${SECRET}"}\n`, '?project=p2');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('DATASET_ROW_INVALID');
    expect(res.body).not.toContain(SECRET);
    expect(await list('team/datasets/')).toEqual(before);
    expect(await list('team/datasets/p2/')).toEqual([]);
  });

  it('imports a Parquet object from incoming/<project>/, written there by boto3', async () => {
    const file = join(scratch, 'eval.parquet');
    writeFileSync(
      file,
      Buffer.from(
        parquetWriteBuffer({
          columnData: [
            { name: 'id', data: ['q1', 'q2'], type: 'STRING' },
            { name: 'question', data: ['capital?', 'planet?'], type: 'STRING' },
            { name: 'expected', data: ['Paris', 'Jupiter'], type: 'STRING' },
          ],
        }),
      ),
    );
    await moto.admin(['put', BUCKET, 'team/incoming/p1/eval.parquet', file]);
    const imported = await t.app.datasets.import(OPEN_PRINCIPAL, {
      project: 'p1',
      name: 'imported',
      uri: `s3://${BUCKET}/team/incoming/p1/eval.parquet`,
    });
    expect(imported.records).toBe(2);
    expect(await list('team/datasets/p1/imported/')).toEqual([`team/${imported.path}`]);
    expect(await t.app.datasets.read('p1', imported.path)).toEqual([
      { id: 'q1', input: 'capital?', reference: 'Paris' },
      { id: 'q2', input: 'planet?', reference: 'Jupiter' },
    ]);
    // The root-relative form names the same object.
    const relative = await t.app.datasets.import(OPEN_PRINCIPAL, {
      project: 'p1',
      name: 'imported',
      uri: 'incoming/p1/eval.parquet',
    });
    expect(relative.path).toBe(imported.path);
    // The object to import stays where it was.
    expect(await list('team/incoming/')).toEqual(['team/incoming/p1/eval.parquet']);
  });

  it('refuses import URIs outside the root’s incoming/<project>/ and reports missing objects', async () => {
    for (const uri of [
      `s3://${BUCKET}/team/incoming/p2/eval.parquet`,
      `s3://other-bucket/team/incoming/p1/eval.parquet`,
      `s3://${BUCKET}/elsewhere/incoming/p1/eval.parquet`,
      `s3://${BUCKET}/team/datasets/p1/x.jsonl`,
      `s3://${BUCKET}/team/incoming/p1/../p2/eval.parquet`,
      'file:///etc/passwd',
    ]) {
      await expect(
        t.app.datasets.import(OPEN_PRINCIPAL, { project: 'p1', name: 'x', uri }),
        uri,
      ).rejects.toMatchObject({ code: 'DATASET_URI_REFUSED' });
    }
    await expect(
      t.app.datasets.import(OPEN_PRINCIPAL, {
        project: 'p1',
        name: 'x',
        uri: 'incoming/p1/missing.jsonl',
      }),
    ).rejects.toMatchObject({ code: 'DATASET_NOT_FOUND' });
  });

  it('lists published datasets from the bucket (ListObjectsV2) with their record counts, page by page', async () => {
    // Two versions of one dataset (the upload helper names it `evals`).
    expect((await upload('{"input":"a"}\n', '?project=p4')).statusCode).toBe(200);
    expect((await upload('{"input":"a"}\n{"input":"b"}\n', '?project=p4')).statusCode).toBe(200);
    const all = await t.app.datasets.list(OPEN_PRINCIPAL, 'p4', { pageSize: 1000 });
    expect(all.nextPageToken).toBeUndefined();
    expect(all.items.map((d) => [d.name, d.records])).toEqual(
      expect.arrayContaining([
        ['evals', 1],
        ['evals', 2],
      ]),
    );
    expect(all.items).toHaveLength(2);
    const [first] = all.items;
    expect(first?.path).toMatch(/^datasets\/p4\/evals\/[0-9a-f]{64}\.jsonl$/);
    expect(first?.bytes).toBe((await moto.admin(['get', BUCKET, `team/${first?.path}`])).length);
    expect(Date.parse(first?.uploadedAt ?? '')).toBeGreaterThan(Date.now() - 600_000);
    const page1 = await t.app.datasets.list(OPEN_PRINCIPAL, 'p4', { pageSize: 1 });
    expect(page1.items).toEqual([first]);
    const page2 = await t.app.datasets.list(OPEN_PRINCIPAL, 'p4', {
      pageSize: 1,
      pageToken: page1.nextPageToken,
    });
    expect([...page1.items, ...page2.items]).toEqual(all.items);
    // The details sit outside datasets/, one object per dataset.
    expect(await list('team/meta/p4/')).toHaveLength(2);
  });

  it('notices an object changed in the bucket', async () => {
    const res = await upload('{"input":"tamper me"}\n');
    const { path } = res.json();
    const file = join(scratch, 'changed.jsonl');
    writeFileSync(file, '{"id":"1","input":"changed"}\n');
    await moto.admin(['put', BUCKET, `team/${path}`, file]);
    await expect(t.app.datasets.read('p1', path)).rejects.toMatchObject({
      code: 'DATASET_CORRUPT',
    });
  });

  it('is refused by the bucket with a wrong secret, and says so without the secret', async () => {
    const wrong = 'not-the-secret-key-0000';
    const other = await testApp(rootConfig(), {
      DATASET_S3_KEY: moto.accessKeyId,
      DATASET_S3_SECRET: wrong,
    });
    try {
      const res = await other.app.server.inject({
        method: 'POST',
        url: '/v1alpha1/datasets/evals/upload?project=p3',
        payload: '{"input":"a"}\n',
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('DATASET_STORAGE_REFUSED');
      expect(res.json().error.message).toContain('HTTP 403 SignatureDoesNotMatch');
      expect(res.body).not.toContain(wrong);
      expect(res.body).not.toContain(moto.accessKeyId);
    } finally {
      await other.close();
    }
    expect(await list('team/datasets/p3/')).toEqual([]);
  });

  it('names an unset credential variable', async () => {
    const other = await testApp(rootConfig(), { DATASET_S3_KEY: moto.accessKeyId });
    try {
      const res = await other.app.server.inject({
        method: 'POST',
        url: '/v1alpha1/datasets/evals/upload?project=p3',
        payload: '{"input":"a"}\n',
      });
      expect(res.json().error.code).toBe('CREDENTIAL_UNREADABLE');
      expect(res.json().error.message).toContain('DATASET_S3_SECRET');
    } finally {
      await other.close();
    }
  });
});
