/**
 * Hostile gateway streams against an ext_proc server, run in a child process by the adversarial
 * suite so that the probes it times do not share an event loop with them.
 */
import { spawn } from 'node:child_process';
import http2 from 'node:http2';
import { fileURLToPath } from 'node:url';
import {
  connectClient,
  exchange,
  MCP_HEADERS,
  toolCall,
} from '../../src/guardrails/ext-proc/gateway.testkit.js';

export const HOSTILE_METADATA = { 'x-touchstone-guard-policy': 'mcp-tools' };
/** A secret the hostile bodies carry, which no answer may echo. */
export const HOSTILE_SECRET = 'ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789';

export interface Answered {
  status?: number;
  text?: string;
  ms: number;
}

/**
 * A stream that announces a body and never sends it (`headers`), or sends nothing at all, opened
 * after `delayMs` (a gateway opens streams as its clients arrive, not all in one instant).
 */
async function stall(address: string, headers: boolean, delayMs: number): Promise<Answered> {
  await new Promise((r) => setTimeout(r, delayMs));
  const started = performance.now();
  const stream = connectClient(address, HOSTILE_METADATA);
  try {
    if (headers) {
      stream.send({
        kind: 'requestHeaders',
        headers: [[':method', 'POST'], [':path', '/mcp'], ...Object.entries(MCP_HEADERS)],
        endOfStream: false,
      });
      const first = await stream.receive();
      if (first === 'end' || first.kind !== 'requestHeaders') throw new Error('no headers answer');
    }
    const answer = await stream.receive();
    if (answer === 'end') return { ms: performance.now() - started };
    return { status: answer.status ?? 0, text: answer.text ?? '', ms: performance.now() - started };
  } finally {
    stream.cancel();
  }
}

/** A whole exchange with this body: the immediate answer, or no status when forwarded. */
async function post(address: string, body: string): Promise<Answered> {
  const started = performance.now();
  const out = await exchange(connectClient, address, HOSTILE_METADATA, {
    method: 'POST',
    path: '/mcp',
    body,
  });
  const ms = performance.now() - started;
  return out.blocked ? { status: out.status, text: out.text, ms } : { ms };
}

/** Bytes that are not a ProcessingRequest on a raw stream: the gRPC status it ends with. */
async function garbage(address: string): Promise<Answered> {
  const started = performance.now();
  const session = http2.connect(`http://${address}`);
  try {
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 64]), Buffer.alloc(64, 0xff)]);
    const status = await new Promise<string>((resolve, reject) => {
      const req = session.request({
        ':method': 'POST',
        ':path': '/envoy.service.ext_proc.v3.ExternalProcessor/Process',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      let grpcStatus = '';
      let message = '';
      const read = (h: http2.IncomingHttpHeaders) => {
        if (h['grpc-status'] !== undefined) grpcStatus = String(h['grpc-status']);
        if (h['grpc-message'] !== undefined)
          message = decodeURIComponent(String(h['grpc-message']));
      };
      req.on('response', read);
      req.on('trailers', read);
      req.on('data', () => {});
      req.on('end', () => resolve(`${grpcStatus} ${message}`));
      req.on('error', reject);
      req.end(frame);
    });
    return { text: status, ms: performance.now() - started };
  } finally {
    session.close();
  }
}

export type HostileRun =
  | { kind: 'stalls'; address: string; withHeaders: number; silent: number }
  | { kind: 'bodies'; address: string }
  | { kind: 'garbage'; address: string };

/** Runs one hostile scenario; every answer with its time. */
export async function runHostile(run: HostileRun): Promise<Record<string, Answered[]>> {
  switch (run.kind) {
    case 'stalls': {
      const [withHeaders, silent] = await Promise.all([
        Promise.all(
          Array.from({ length: run.withHeaders }, (_, i) => stall(run.address, true, i * 20)),
        ),
        Promise.all(
          Array.from({ length: run.silent }, (_, i) => stall(run.address, false, i * 100)),
        ),
      ]);
      return { withHeaders, silent };
    }
    case 'bodies': {
      const pad = HOSTILE_SECRET.repeat(Math.ceil((10 * 1024 * 1024) / HOSTILE_SECRET.length));
      const huge = JSON.stringify(toolCall(1, 'x', { pad }));
      const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
      const batch = JSON.stringify(
        Array.from({ length: 1000 }, (_, i) => toolCall(i, 'x', { t: HOSTILE_SECRET })),
      );
      return {
        huge: [await post(run.address, huge)],
        deep: [await post(run.address, deep)],
        batch: [await post(run.address, batch)],
      };
    }
    case 'garbage': {
      const init = JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} });
      return { garbage: [await garbage(run.address)], after: [await post(run.address, init)] };
    }
  }
}

const CHILD = fileURLToPath(new URL('./ext-proc-hostile-child.ts', import.meta.url));

/** `runHostile` in a child process (its answers come back as JSON on its stdout). */
export async function runHostileInChild(run: HostileRun): Promise<Record<string, Answered[]>> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(run)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`the hostile client exited with ${code}`);
  return JSON.parse(out) as Record<string, Answered[]>;
}
