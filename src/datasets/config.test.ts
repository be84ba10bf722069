import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/index.js';
import { isTouchstoneError } from '../core/index.js';
import { createDatasetRoot } from './index.js';

/** `datasets.*` in the server config: defaults, the S3 section's rules, the root built from it. */

function problems(overrides: Record<string, unknown>): string[] {
  try {
    loadConfig({ env: {}, overrides: { datasets: overrides } });
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    return err.details.map((d) => `${d.path}: ${d.message}`);
  }
  return [];
}

const s3 = {
  endpoint: 'http://127.0.0.1:9000',
  access_key_id: { env: 'KEY' },
  secret_access_key: { file: 'bucket/secret' },
};

describe('datasets configuration', () => {
  it('defaults the root to <data_dir>/datasets', () => {
    const config = loadConfig({ env: {}, overrides: { data_dir: '/var/lib/ts' } });
    expect(config.datasets.root).toBe(join('/var/lib/ts', 'datasets'));
    expect(createDatasetRoot(config, { env: {} }).location).toBe('/var/lib/ts/datasets');
  });

  it('takes an s3:// root with its section, and names what is missing or wrong', () => {
    expect(problems({ root: 's3://acme-evals/touchstone', s3 })).toEqual([]);
    expect(problems({ root: 's3://acme-evals/touchstone' })).toEqual([
      'datasets.s3: required when datasets.root is an s3:// bucket (endpoint, region, credentials)',
    ]);
    expect(problems({ root: 's3://A_Bucket', s3 })).toEqual([
      'datasets.root: expected s3://<bucket>[/<prefix>] with a valid bucket name',
    ]);
    expect(problems({ root: '/srv/datasets', s3 })).toEqual([
      'datasets.s3: only used when datasets.root is an s3:// bucket',
    ]);
    const bad = problems({
      root: 's3://acme-evals',
      s3: { ...s3, secret_access_key: { file: '../etc/passwd' }, access_key_id: 'AKIA…' },
    });
    expect(bad.map((p) => p.split(':')[0])).toEqual([
      'datasets.s3.access_key_id',
      'datasets.s3.secret_access_key.file',
    ]);
    expect(bad.join('\n')).not.toContain('AKIA');
  });

  it('builds an S3 root on the configured bucket and prefix', () => {
    const config = loadConfig({
      env: {},
      overrides: { datasets: { root: 's3://acme-evals/team/evals/', s3 } },
    });
    const root = createDatasetRoot(config, { env: {} });
    expect(root.location).toBe('s3://acme-evals/team/evals');
    expect(root.relativeKey('s3://acme-evals/team/evals/incoming/p/x.jsonl')).toBe(
      'incoming/p/x.jsonl',
    );
    expect(root.relativeKey('s3://acme-evals/team/other/incoming/p/x.jsonl')).toBeUndefined();
    expect(root.relativeKey('incoming/p/x.jsonl')).toBe('incoming/p/x.jsonl');
  });
});
