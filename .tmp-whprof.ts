import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createApp } from './src/app.js';
import { OPEN_PRINCIPAL } from './src/auth/index.js';
import { loadConfig } from './src/config/index.js';

let n = 0;
const server = createServer((req, res) => { req.resume(); req.on('end', () => { n++; res.writeHead(204).end(); }); });
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const port = (server.address() as { port: number }).port;
const dataDir = mkdtempSync(join(tmpdir(), 'whprof-'));
const config = loadConfig({ overrides: { data_dir: dataDir, log_level: 'silent', webhooks: { allow_hosts: ['127.0.0.1'] } } });
const app = await createApp(config, { env: {}, processMetrics: false, logger: pino({ level: 'silent' }) });
await app.webhooks.service.apply(OPEN_PRINCIPAL, { name: 'b', url: `http://127.0.0.1:${port}/`, events: ['trace.scored'] });
const N = 5000;
let t = performance.now();
await app.store.withTransaction(async (tx) => {
  for (let i = 0; i < N; i++) await app.webhooks.emitter.emitEvent(tx, { type: 'trace.scored', project: 'default', policy: 'p', trace: { traceId: `t${i}`, service: 's', name: 'n', startTime: '2026-01-01T00:00:00Z', durationMs: 1, steps: 1, error: false, labels: {} }, results: [] });
});
console.log('enqueue', (performance.now() - t).toFixed(0), 'ms');
t = performance.now();
await app.webhooks.dispatcher.tick();
const ms = performance.now() - t;
console.log('dispatch', ms.toFixed(0), 'ms', (N / (ms / 1000)).toFixed(0), '/s', 'received', n);
await app.close();
server.close();
