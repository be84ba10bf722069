import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../support/app.js';

/**
 * The official MCP conformance runner (@modelcontextprotocol/conformance, pinned) against `/mcp`.
 * Only the server scenarios that do not expect the reference server's own demo tools apply.
 */
const SCENARIOS = ['server-initialize', 'tools-list', 'ping', 'dns-rebinding-protection'];

const RUNNER = createRequire(import.meta.url).resolve(
  '@modelcontextprotocol/conformance/dist/index.js',
);

function conformance(url: string, scenario: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [RUNNER, 'server', '--url', url, '--scenario', scenario], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
    });
    proc.stderr.on('data', (d) => {
      out += d;
    });
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    proc.on('error', reject);
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe('MCP conformance runner', () => {
  let t: TestApp;
  let url = '';
  beforeAll(async () => {
    // No auth section on loopback: the runner sends no credential.
    t = await testApp({ listen: '127.0.0.1:0' });
    const port = (await t.app.listen()).split(':').pop();
    url = `http://localhost:${port}/mcp`;
  });
  afterAll(async () => {
    await t?.close();
  });

  for (const scenario of SCENARIOS) {
    it(`passes ${scenario}`, async () => {
      const { code, out } = await conformance(url, scenario);
      expect(out, out).toMatch(/Passed: (\d+)\/\1, 0 failed/);
      expect(code, out).toBe(0);
    });
  }
});
