// A Touchstone webhook receiver with nothing but node:crypto.
// Run: WEBHOOK_SECRET=whsec_... PORT=8000 node receiver-node.mjs
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const secret = process.env.WEBHOOK_SECRET;
const TOLERANCE_SECONDS = 300; // refuse signatures older (or newer) than five minutes
const handled = new Set();

// Header: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">[,v1=<another>]
function verify(raw, header) {
  const parts = (header ?? '').split(',').map((p) => p.trim().split('='));
  const t = Number(parts.find(([key]) => key === 't')?.[1]);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > TOLERANCE_SECONDS) return false;
  const expected = createHmac('sha256', secret).update(`${t}.`).update(raw).digest();
  return parts
    .filter(([key]) => key === 'v1')
    .map(([, hex]) => Buffer.from(hex ?? '', 'hex'))
    .some((sig) => sig.length === expected.length && timingSafeEqual(sig, expected));
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    if (!verify(raw, req.headers['touchstone-signature'])) {
      res.writeHead(400).end();
      return;
    }
    const id = req.headers['touchstone-delivery'];
    if (!handled.has(id)) {
      handled.add(id);
      const event = JSON.parse(raw.toString('utf8'));
      console.log(`${event.type} ${event.id}`);
    }
    res.writeHead(204).end();
  });
});

server.listen(Number(process.env.PORT ?? 8000), '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
