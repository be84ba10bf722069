import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  cliOnTerminal,
  freePort,
  type ServerProcess,
  startServer,
} from '../../test/support/process.js';
import { ApiClient } from './client.js';

/**
 * `touchstone datasets list|upload|import` and `evaluators list`, the real process: local data dir
 * and `--server`.
 */

// Each CLI process takes seconds on a loaded machine.
describe('touchstone datasets', { timeout: 120_000 }, () => {
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

  it('reports the bytes of an upload as they are sent, and the server’s early refusal', async () => {
    const client = new ApiClient(base, undefined);
    const rows = Array.from({ length: 20_000 }, (_, i) =>
      JSON.stringify({ id: `r${i}`, input: `question ${i} ${'x'.repeat(100)}` }),
    );
    const data = Buffer.from(`${rows.join('\n')}\n`);
    const heard: [number, number][] = [];
    const result = await client.callRaw<{ records: number }>(
      'POST',
      'v1alpha1/datasets/big/upload?format=jsonl',
      { data, contentType: 'application/jsonl' },
      {},
      (sent, total) => heard.push([sent, total]),
    );
    expect(result.records).toBe(20_000);
    expect(heard.length).toBeGreaterThan(2);
    expect(heard[0]).toEqual([0, data.length]);
    expect(heard.at(-1)).toEqual([data.length, data.length]);
    expect(
      heard.every(([sent], i) => i === 0 || sent > (heard[i - 1] as [number, number])[0]),
    ).toBe(true);
    // Refused before the body is read: the answer still arrives.
    await expect(
      client.callRaw(
        'POST',
        'v1alpha1/datasets/Bad%20Name/upload',
        {
          data,
          contentType: 'application/jsonl',
        },
        {},
        () => {},
      ),
    ).rejects.toMatchObject({
      code: 2,
      message: expect.stringContaining('DATASET_INVALID_REQUEST'),
    });
  });

  it('draws the bytes sent of an upload on a terminal, and prints nothing of it when piped', () => {
    const big = join(dir, 'big.jsonl');
    writeFileSync(
      big,
      Array.from({ length: 30_000 }, (_, i) => JSON.stringify({ input: `q${i} ${'x'.repeat(80)}` }))
        .join('\n')
        .concat('\n'),
    );
    const mib = (statSync(big).size / 1024 / 1024).toFixed(1);
    const terminal = cliOnTerminal(['datasets', 'upload', big, '--name', 'big', '--server', base]);
    expect(terminal.code, terminal.output).toBe(0);
    expect(terminal.output).toContain(`uploading ${'█'.repeat(24)} ${mib}/${mib} MiB (100%)`);
    expect(terminal.output).toMatch(/datasets\/default\/big\/[0-9a-f]{64}\.jsonl/);
    const piped = cli(['datasets', 'upload', big, '--name', 'big', '--server', base]);
    expect(piped.code).toBe(0);
    expect(piped.stderr).not.toContain('uploading');
  });

  it('lists the published datasets of the local data dir and of a server', () => {
    const local = cli(['datasets', 'list', '--project', 'p1', '--data-dir', join(dir, 'local')]);
    expect(local.code, local.stderr).toBe(0);
    expect(local.stdout).toMatch(/^NAME\s+RECORDS\s+BYTES\s+UPLOADED\s+PATH\n/);
    expect(local.stdout).toMatch(/\nqa\s+2\s+\d+\s+\S+Z\s+datasets\/p1\/qa\/[0-9a-f]{64}\.jsonl\n/);
    const remote = cli(['datasets', 'list', '--server', base, '--json']);
    expect(remote.code, remote.stderr).toBe(0);
    const listed = JSON.parse(remote.stdout) as { name: string; records: number }[];
    expect(listed.map((d) => [d.name, d.records])).toEqual(
      expect.arrayContaining([
        ['pq', 3],
        ['more', 1],
      ]),
    );
  });

  it('lists evaluator types with what they need and their params', () => {
    const r = cli(['evaluators', 'list']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('regex-match (cheap; needs output)\n  Output matches');
    expect(r.stdout).toMatch(/\n {2}params: pattern \(required\), fullMatch, flags\n/);
    expect(r.stdout).toMatch(/llm-judge \(calls a judge model; needs [^)]*\)/);
    const remote = cli(['evaluators', 'list', '--server', base.replace('http://', ''), '--json']);
    expect(remote.code, remote.stderr).toBe(0);
    const types = JSON.parse(remote.stdout) as { type: string; params: { required?: string[] } }[];
    expect(types.find((t) => t.type === 'regex-match')?.params.required).toEqual(['pattern']);
  });
});
