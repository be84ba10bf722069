import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { cli, cliAsync } from '../../test/support/process.js';
import { seedWideTrace } from '../../test/ui/data.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';

/**
 * `touchstone traces annotate`, the real process: on a local data dir (annotator `anonymous`,
 * as a server without auth), and against a server with a key (the key is the annotator, and
 * `--idempotency-key` replays). Usage errors exit 2 before anything is sent.
 */

describe('touchstone traces annotate on a local data dir', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-cli-annotate-'));
  let traceId = '';
  beforeAll(async () => {
    traceId = await seedWideTrace(dir, 'default', 3);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const annotate = (...args: string[]) =>
    cli(['traces', 'annotate', traceId, '--data-dir', dir, ...args]);

  it('stores the score, shown by scores list under @human', () => {
    const r = annotate('--name', 'correct', '--fail', '--comment', 'wrong city', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      project: 'default',
      traceId,
      policy: '@human',
      result: {
        evaluator: 'correct',
        scores: [{ name: 'correct', passed: false, explanation: 'wrong city' }],
        annotator: { kind: 'human', principal: 'anonymous' },
      },
    });
    const text = annotate('--name', 'tone', '--value', '0.25');
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toBe(
      `annotated: trace ${traceId} (project default) tone=0.25 by anonymous\n`,
    );
    const listed = cli(['scores', 'list', '--policy', '@human', '--data-dir', dir, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const [entry] = JSON.parse(listed.stdout);
    expect(entry.trace.traceId).toBe(traceId);
    expect(entry.results['@human'].map((r: { evaluator: string }) => r.evaluator)).toEqual([
      'correct',
      'tone',
    ]);
  }, 120_000);

  it('exits 2 on a usage error or an annotation the server refuses, 1 on a missing trace', () => {
    for (const args of [
      ['--name', 'x'],
      ['--name', 'x', '--pass', '--fail'],
      ['--name', 'x', '--value', 'high'],
    ]) {
      const r = annotate(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/--value|--pass|--label/);
    }
    const range = annotate('--name', 'x', '--value', '1.5');
    expect(range.code).toBe(2);
    expect(range.stderr).toContain('value');
    const missing = cli([
      'traces',
      'annotate',
      'f'.repeat(32),
      '--name',
      'x',
      '--pass',
      '--data-dir',
      dir,
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no trace');
  }, 120_000);
});

describe('touchstone traces annotate --server', () => {
  let t: TestApp;
  let base = '';
  let traceId = '';
  let editor = { id: '', secret: '' };
  let viewer = '';

  beforeAll(async () => {
    t = await testApp({ auth: {} });
    traceId = await seedWideTrace(t.dataDir, 'p1', 3);
    const key = await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['editor'] });
    editor = { id: key.key.id, secret: key.secret };
    viewer = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['viewer'] })).secret;
    await t.app.server.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => t.close());

  const annotate = (secret: string, ...args: string[]) =>
    cliAsync(['traces', 'annotate', traceId, '--server', base, ...args], {
      TOUCHSTONE_API_KEY: secret,
    });

  it('annotates as the key, replays a retried key, and needs traces.annotate', async () => {
    const args = ['--name', 'helpful', '--label', 'partly', '--idempotency-key', 'k1', '--json'];
    const first = await annotate(editor.secret, ...args);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout).result.annotator).toEqual({
      kind: 'human',
      principal: editor.id,
    });
    const again = await annotate(editor.secret, ...args);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(first.stdout);
    const changed = await annotate(
      editor.secret,
      '--name',
      'helpful',
      '--label',
      'fully',
      '--idempotency-key',
      'k1',
    );
    expect(changed.code).toBe(1);
    expect(changed.stderr).toContain('Idempotency-Key');

    const denied = await annotate(viewer, '--name', 'helpful', '--pass');
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('traces.annotate');

    const stored = await t.app.store.results.forTrace('p1', traceId);
    expect(stored?.policies.find((p) => p.policy === '@human')?.results).toHaveLength(1);
  }, 120_000);
});
