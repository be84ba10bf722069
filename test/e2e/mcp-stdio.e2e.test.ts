import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonOf, type McpFixture, mcpFixture, sdkClient } from '../support/mcp.js';
import { ENTRY } from '../support/process.js';

/** No stored sign-in of this machine's user is picked up. */
const CONFIG_DIR = mkdtempSync(join(tmpdir(), 'touchstone-mcp-config-'));

/** `touchstone mcp` as a client starts it: the real process, the protocol on its stdin/stdout. */
function stdioClient(args: string[], env: Record<string, string>) {
  return new StdioClientTransport({
    command: process.execPath,
    args: [...ENTRY, 'mcp', ...args],
    env: { ...(process.env as Record<string, string>), TOUCHSTONE_CONFIG_DIR: CONFIG_DIR, ...env },
    stderr: 'pipe',
  });
}

describe('touchstone mcp (stdio)', () => {
  let f: McpFixture;
  const server = () => f.url.replace(/\/mcp$/, '');

  beforeAll(async () => {
    f = await mcpFixture();
  });
  afterAll(async () => {
    await f?.close();
    rmSync(CONFIG_DIR, { recursive: true, force: true });
  });

  it('serves the tools of /mcp, as the key in TOUCHSTONE_API_KEY, with the same answers', async () => {
    const stdio = new Client({ name: 'touchstone-tests', version: '1.0.0' });
    await stdio.connect(stdioClient(['--server', server()], { TOUCHSTONE_API_KEY: f.keys.viewer }));
    const http = await sdkClient(f.url, f.keys.viewer);
    try {
      expect((await stdio.listTools()).tools).toEqual((await http.listTools()).tools);
      const args = { name: 'get_trace', arguments: { trace_id: f.traceId } };
      expect(await stdio.callTool(args)).toEqual(await http.callTool(args));
      const me = jsonOf(await stdio.callTool({ name: 'whoami', arguments: {} }));
      expect(me).toMatchObject({ kind: 'key', roles: ['viewer'] });
    } finally {
      await stdio.close();
      await http.close();
    }
  });

  it('answers a request the server refuses (no credential) with a JSON-RPC error, not silence', async () => {
    const stdio = new Client({ name: 'touchstone-tests', version: '1.0.0' });
    const connecting = stdio.connect(
      stdioClient(['--server', server()], { TOUCHSTONE_API_KEY: '' }),
    );
    await expect(connecting).rejects.toThrow(/missing credentials/);
    await stdio.close();
  });

  it('works with an independent client (@ai-sdk/mcp)', async () => {
    const client = await createMCPClient({
      transport: new Experimental_StdioMCPTransport({
        command: process.execPath,
        args: [...ENTRY, 'mcp', '--server', server()],
        env: { ...(process.env as Record<string, string>), TOUCHSTONE_API_KEY: f.keys.owner },
      }),
    });
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('create_run');
      const set = await client.tools();
      const result = await set.search_traces?.execute({}, { toolCallId: '1', messages: [] });
      expect(jsonOf<{ traces: { traceId: string }[] }>(result).traces[0]?.traceId).toBe(f.traceId);
    } finally {
      await client.close();
    }
  });

  it('without --server, calls the API in process on the local data dir', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-mcp-'));
    const stdio = new Client({ name: 'touchstone-tests', version: '1.0.0' });
    try {
      await stdio.connect(
        stdioClient(['--data-dir', dir], { TOUCHSTONE_SERVER: '', TOUCHSTONE_API_KEY: '' }),
      );
      const me = jsonOf(await stdio.callTool({ name: 'whoami', arguments: {} }));
      // No auth section on a loopback data dir: the open principal, as every local command.
      expect(me).toMatchObject({ kind: 'open', roles: ['owner'] });
      const uploaded = jsonOf<{ dataset: { records: number } }>(
        await stdio.callTool({
          name: 'upload_dataset',
          arguments: { name: 'local', rows: [{ input: 'q', reference: 'a' }] },
        }),
      );
      expect(uploaded.dataset.records).toBe(1);
    } finally {
      await stdio.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
