import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';

/**
 * `/ui/`: the built web UI served from a directory (a stand-in build here; the browser suite
 * serves the real one): security headers on every answer, caching by kind of file, deep links
 * answered with the page, missing assets a 404, gzip, no credentials needed for the page itself.
 */

const INDEX =
  '<!doctype html><html><head><script type="module" src="/ui/assets/app-3f2a.js"></script></head><body></body></html>';
const SCRIPT = `console.log(${JSON.stringify('x'.repeat(4000))});`;

function fakeBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-ui-build-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), INDEX);
  writeFileSync(join(dir, 'assets', 'app-3f2a.js'), SCRIPT);
  writeFileSync(join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  return dir;
}

describe('the web UI’s files at /ui/', () => {
  const build = fakeBuild();
  const empty = mkdtempSync(join(tmpdir(), 'touchstone-ui-empty-'));
  let t: TestApp;
  let unbuilt: TestApp;
  let disabled: TestApp;

  beforeAll(async () => {
    t = await testApp({ auth: {}, ui: { assets_dir: build } });
    unbuilt = await testApp({ ui: { assets_dir: empty } });
    disabled = await testApp({ ui: { enabled: false, assets_dir: build } });
  });
  afterAll(async () => {
    await t.close();
    await unbuilt.close();
    await disabled.close();
    rmSync(build, { recursive: true, force: true });
    rmSync(empty, { recursive: true, force: true });
  });

  const get = (url: string, headers: Record<string, string> = {}, on = t) =>
    on.app.server.inject({ url, headers });

  function expectSecurityHeaders(headers: Record<string, unknown>): void {
    const csp = String(headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("require-trusted-types-for 'script'");
    expect(csp).not.toContain('unsafe-inline');
    expect(headers['x-content-type-options']).toBe('nosniff');
    expect(headers['referrer-policy']).toBe('no-referrer');
    expect(headers['x-frame-options']).toBe('DENY');
  }

  it('serves the page without credentials, revalidated on every load, with the security headers', async () => {
    const res = await get('/ui/');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.body).toBe(INDEX);
    expectSecurityHeaders(res.headers);
    const again = await get('/ui/', { 'if-none-match': String(res.headers.etag) });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    // The API itself still needs a key.
    expect((await get('/v1alpha1/traces')).statusCode).toBe(401);
  });

  it('answers deep links with the page and redirects /ui to /ui/', async () => {
    for (const url of ['/ui/traces/4bf92f3577b34da6a3ce929d0e0e4736', '/ui/scores?project=a']) {
      const res = await get(url);
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe(INDEX);
    }
    const redirect = await get('/ui?project=shop');
    expect(redirect.statusCode).toBe(308);
    expect(redirect.headers.location).toBe('/ui/?project=shop');
  });

  it('serves hashed assets as immutable, gzipped when the client accepts it', async () => {
    const plain = await get('/ui/assets/app-3f2a.js');
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body).toBe(SCRIPT);
    const zipped = await get('/ui/assets/app-3f2a.js', { 'accept-encoding': 'gzip, br' });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.rawPayload.length).toBeLessThan(SCRIPT.length / 10);
    expect(gunzipSync(zipped.rawPayload).toString()).toBe(SCRIPT);
    expect((await get('/ui/favicon.svg')).headers['content-type']).toBe('image/svg+xml');
  });

  it('answers a missing asset 404, never with the page, and reads nothing outside the build', async () => {
    for (const url of ['/ui/assets/gone-1234.js', '/ui/..%2fpackage.json']) {
      const res = await get(url);
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ROUTE_NOT_FOUND');
      expectSecurityHeaders(res.headers);
    }
  });

  it('says the UI is not built when its directory holds no page, and is absent when disabled', async () => {
    const res = await get('/ui/', {}, unbuilt);
    expect(res.statusCode).toBe(503);
    expect(res.json().error.code).toBe('UI_NOT_BUILT');
    expect(res.json().error.message).toContain('npm run build');
    expect((await get('/ui/', {}, disabled)).statusCode).toBe(404);
  });
});
