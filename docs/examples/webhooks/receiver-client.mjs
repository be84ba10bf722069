// A Touchstone webhook receiver using the TypeScript client's verifyWebhookSignature.
// Run: WEBHOOK_SECRET=whsec_... PORT=8000 node receiver-client.mjs
import { createServer } from 'node:http';
import { verifyWebhookSignature, WebhookSignatureError } from 'touchstone/client';

const secret = process.env.WEBHOOK_SECRET; // shown once by `touchstone webhook apply`
const handled = new Set(); // delivery ids already handled; keep them in your database

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    // Verify the raw bytes, before any JSON parsing: re-serialized JSON would not match.
    const raw = Buffer.concat(chunks);
    try {
      verifyWebhookSignature({ payload: raw, header: req.headers['touchstone-signature'], secret });
    } catch (err) {
      if (!(err instanceof WebhookSignatureError)) throw err;
      res.writeHead(400).end(err.reason);
      return;
    }
    // Delivery is at least once: the same Touchstone-Delivery may arrive again.
    const id = req.headers['touchstone-delivery'];
    if (!handled.has(id)) {
      handled.add(id);
      const event = JSON.parse(raw.toString('utf8'));
      console.log(`${event.type} ${event.id}`); // act on the event here
    }
    res.writeHead(204).end(); // any 2xx counts as delivered; answer quickly
  });
});

server.listen(Number(process.env.PORT ?? 8000), '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
