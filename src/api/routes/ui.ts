import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BrowserSignIn } from '../../auth/index.js';
import { ApiErrors } from '../error-codes.js';
import { uiLoginRoutes } from './ui-login.js';

/** The package's own build of the UI: `dist/ui` beside `dist/api` (and beside `src/` in a checkout). */
export const DEFAULT_UI_DIR = fileURLToPath(new URL('../../../dist/ui/', import.meta.url));

/**
 * The page may load scripts, styles, images and fonts from this server only, and call only this
 * server; no inline script or style, no plug-ins, no framing, and DOM sinks that parse HTML take
 * no strings (Trusted Types), so trace content can only ever be text.
 */
export const UI_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  'trusted-types',
].join('; ');

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': UI_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg', '.json', '.txt']);

interface Asset {
  body: Buffer;
  gzip?: Buffer;
  type: string;
  etag: string;
  cacheControl: string;
}

/** Every file under `dir`, keyed by its path relative to it (`assets/index-3f2a.js`). */
function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  let names: string[];
  try {
    names = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  } catch {
    return assets;
  }
  for (const name of names) {
    const file = join(dir, name);
    if (!statSync(file).isFile()) continue;
    const path = name.split(sep).join('/');
    const ext = extname(path);
    const body = readFileSync(file);
    const gzip = COMPRESSIBLE.has(ext) ? gzipSync(body, { level: 9 }) : undefined;
    assets.set(path, {
      body,
      ...(gzip !== undefined && gzip.length < body.length ? { gzip } : {}),
      type: TYPES[ext] ?? 'application/octet-stream',
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      // Vite names every built asset by its content hash: it never changes under one name. The
      // page itself is revalidated on every load, so a new build is picked up at once.
      cacheControl: path.startsWith('assets/')
        ? 'public, max-age=31536000, immutable'
        : path === 'index.html'
          ? 'no-cache'
          : 'public, max-age=3600',
    });
  }
  return assets;
}

function send(request: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  reply.header('content-type', asset.type);
  reply.header('cache-control', asset.cacheControl);
  reply.header('etag', asset.etag);
  reply.header('vary', 'accept-encoding');
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  const accepts = String(request.headers['accept-encoding'] ?? '');
  if (asset.gzip !== undefined && /\bgzip\b/.test(accepts)) {
    reply.header('content-encoding', 'gzip');
    return reply.send(asset.gzip);
  }
  return reply.send(asset.body);
}

/**
 * `/ui/`: the built single-page app. Files are read once at start; a path that is not a file
 * but looks like a page (`/ui/traces/<id>`) gets `index.html`, so deep links and reloads work,
 * while a missing asset (`/ui/assets/x.js`) is a 404, never HTML served as script. `/ui`
 * redirects to `/ui/`. The page holds no data: it calls the public REST API like any client,
 * and `/ui/login/…` when it signs people in at an identity provider.
 */
export async function uiRoutes(
  app: FastifyInstance,
  { dir, signIn }: { dir: string; signIn: BrowserSignIn | undefined },
): Promise<void> {
  const assets = loadAssets(dir);
  const index = assets.get('index.html');

  app.addHook('onSend', async (_request, reply) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
  });

  await app.register(uiLoginRoutes, { signIn });

  app.get('/ui', async (request, reply) => {
    const query = request.url.indexOf('?');
    return reply.redirect(`/ui/${query < 0 ? '' : request.url.slice(query)}`, 308);
  });

  app.get('/ui/*', async (request, reply) => {
    if (index === undefined) {
      throw ApiErrors.UI_NOT_BUILT(
        'the web UI is not built in this installation: run `npm run build` in the checkout (the published package ships it built)',
      );
    }
    const path = (request.params as { '*': string })['*'];
    const asset = assets.get(path);
    if (asset !== undefined) return send(request, reply, asset);
    if (path.startsWith('assets/') || /\.[a-z0-9]{1,8}$/i.test(path)) {
      throw ApiErrors.ROUTE_NOT_FOUND(`no file /ui/${path} in the web UI`);
    }
    return send(request, reply, index);
  });
}
