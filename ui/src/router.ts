import { useEffect, useState } from 'preact/hooks';
import { type Params, queryString } from './api.js';

/**
 * A small history router for paths under /ui/: every view has its own URL (filters in the query
 * string), so a reload or a shared link opens the same view. The server answers index.html for
 * any such path.
 */

export const BASE = '/ui';

export interface Location {
  /** The path below /ui, e.g. `/traces/4bf9…`. */
  path: string;
  query: URLSearchParams;
}

const listeners = new Set<() => void>();

function current(): Location {
  const path = window.location.pathname.startsWith(`${BASE}/`)
    ? window.location.pathname.slice(BASE.length)
    : '/';
  return { path: path === '' ? '/' : path, query: new URLSearchParams(window.location.search) };
}

window.addEventListener('popstate', () => {
  for (const l of listeners) l();
});

/** Goes to `href` (a /ui/… URL) without reloading; `replace` keeps the history entry. */
export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  for (const l of listeners) l();
}

export function useLocation(): Location {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const update = () => setLocation(current());
    listeners.add(update);
    return () => {
      listeners.delete(update);
    };
  }, []);
  return location;
}

/** A /ui URL for `path` with these query parameters (empty ones left out). */
export function href(path: string, params: Params = {}): string {
  return `${BASE}${path}${queryString(params)}`;
}

/** Follows same-page links without a reload; modified clicks (new tab) behave as usual. */
export function onLinkClick(event: MouseEvent): void {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const anchor = (event.target as Element | null)?.closest('a');
  if (anchor === null || anchor === undefined || anchor.target !== '') return;
  const url = new URL(anchor.href, window.location.href);
  if (url.origin !== window.location.origin || !url.pathname.startsWith(`${BASE}/`)) return;
  event.preventDefault();
  navigate(url.pathname + url.search + url.hash);
}
