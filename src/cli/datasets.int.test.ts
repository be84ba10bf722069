import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, freePort, type ServerProcess, startServer } from '../../test/support/process.js';

/** `touchstone datasets upload|import`, the real process: local data dir and `--server`. */

describe('touchstone datasets', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-cli-datasets-'));
  const jsonl = join(dir, 'qa.jsonl');
  const parquet = join(dir, 'qa.parquet');
  const bad = join(dir, 'bad.jsonl');
  let server: ServerProcess;
  let base: string;
  const serverData = join(dir, 'server');

  beforeAll(async () => {
    writeFileSync(jsonl, '{"input":"2+2?","output":"4","reference":"4"}\n{"input":"b"}\n');
    writeFileSync(bad, '{"input":"a"}\n{"input":"b","secret":"do-not-print-me"}\n');
    writeFileSync(
      parquet,
      Buffer.from(
        parquetWriteBuffer({
          columnData: [{ name: 'input', data: ['a', 'b', 'c'], type: 'STRING' }],
        }),
      ),
    );
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = await startServer(['--data-dir', serverData, '--listen', `127.0.0.1:${port}`]);
  });
  afterAll(async () => {
    server?.proc.kill('SIGTERM');
    await server?.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  it('uploads into the local data dir without a server and prints the dataset path', () => {
    const data = join(dir, 'local');
    const r = cli([
      'datasets',
      'upload',
      jsonl,
      '--name',
      'qa',
      '--project',
      'p1',
      '--data-dir',
      data,
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const path = r.stdout.trim();
    expect(path).toMatch(/^datasets\/p1\/qa\/[0-9a-f]{64}\.jsonl$/);
    expect(existsSync(join(data, 'datasets', path))).toBe(true);
  });

  it('exits 2 naming the row of a rejected file, without printing its values', () => {
    const r = cli(['datasets', 'upload', bad, '--name', 'qa', '--data-dir', join(dir, 'local')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('line 2, field secret: unknown field');
    expect(r.stderr + r.stdout).not.toContain('do-not-print-me');
  });

  it('uploads and imports through a server with --server', () => {
    const up = cli(['datasets', 'upload', parquet, '--name', 'pq', '--server', base, '--json']);
    expect(up.stderr).toBe('');
    const result = JSON.parse(up.stdout);
    expect(result).toMatchObject({
      records: 3,
      path: expect.stringMatching(/^datasets\/default\/pq\//),
    });
    expect(existsSync(join(serverData, 'datasets', result.path))).toBe(true);

    mkdirSync(join(serverData, 'datasets', 'incoming', 'default'), { recursive: true });
    writeFileSync(
      join(serverData, 'datasets', 'incoming', 'default', 'more.jsonl'),
      '{"input":"x"}\n',
    );
    const imported = cli([
      'datasets',
      'import',
      'incoming/default/more.jsonl',
      '--name',
      'more',
      '--server',
      base,
    ]);
    expect(imported.stderr).toBe('');
    expect(imported.stdout.trim()).toMatch(/^datasets\/default\/more\/[0-9a-f]{64}\.jsonl$/);
  });

  it("reports a server's refusals with their code, over REST (upload) and Connect (import)", () => {
    const up = cli(['datasets', 'upload', bad, '--name', 'qa', '--server', base]);
    expect(up.code).toBe(2);
    expect(up.stderr).toContain('DATASET_ROW_INVALID: dataset rejected, nothing was published');
    expect(up.stderr).toContain('line 2, field secret: unknown field');
    expect(up.stderr).toMatch(/\(request id [0-9a-f-]{36}\)/);
    expect(up.stderr + up.stdout).not.toContain('do-not-print-me');

    const outside = cli([
      'datasets',
      'import',
      'elsewhere/default/more.jsonl',
      '--name',
      'more',
      '--server',
      base,
    ]);
    expect(outside.code).toBe(2);
    expect(outside.stdout).toBe('');
    expect(outside.stderr).toContain('DATASET_URI_REFUSED');
    expect(outside.stderr).toMatch(/incoming\/default\/[\s\S]*\(request id [0-9a-f-]{36}\)/);
  });
});
