import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The web UI's build: a single-page app served by the server at /ui/ from dist/ui (see
 * src/api/routes/ui.ts). One script and one style sheet, content-hashed; nothing inline (the
 * page's Content-Security-Policy allows no inline script or style) and nothing from a CDN.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/ui/',
  publicDir: 'public',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/ui', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // The preload polyfill would be inline-able code the page does not need (one chunk).
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: false,
  },
  logLevel: 'warn',
});
