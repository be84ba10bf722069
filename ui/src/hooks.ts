import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, apiGet, apiUrl, type Params } from './api.js';

export interface Loaded<T> {
  data?: T;
  error?: Error;
  loading: boolean;
  reload(): void;
}

/**
 * GETs `path` with `params` whenever they change (null: nothing yet), cancelling the request
 * before; with `refreshMs`, again at that interval, keeping what it shows meanwhile.
 */
export function useApi<T>(path: string | null, params: Params = {}, refreshMs?: number): Loaded<T> {
  const url = path === null ? null : apiUrl(path, params);
  const [state, setState] = useState<{ url: string | null; data?: T; error?: Error }>({ url });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);

  useEffect(() => {
    if (url === null || path === null) return;
    const abort = new AbortController();
    apiGet<T>(path, params, abort.signal).then(
      (data) => setState({ url, data }),
      (error: unknown) => {
        if (!abort.signal.aborted)
          setState((s) => ({
            url,
            ...(s.url === url && s.data !== undefined ? { data: s.data } : {}),
            error: error as Error,
          }));
      },
    );
    return () => abort.abort();
  }, [url, tick]);

  useEffect(() => {
    if (refreshMs === undefined || url === null) return;
    const timer = setInterval(reload, refreshMs);
    return () => clearInterval(timer);
  }, [url, refreshMs, reload]);

  const current = state.url === url;
  return {
    ...(current && state.data !== undefined ? { data: state.data } : {}),
    ...(current && state.error !== undefined ? { error: state.error } : {}),
    loading: url !== null && (!current || (state.data === undefined && state.error === undefined)),
    reload,
  };
}

export interface Pages<T, A> {
  items: T[];
  /** The last answer read (for what it says beside the items, such as a total). */
  last?: A;
  error?: Error;
  loading: boolean;
  /** More pages exist. */
  more: boolean;
  loadMore(): void;
}

/**
 * A paged list (`page_size`/`page_token`): the first page when `params` change, the next one on
 * `loadMore` (infinite scroll calls it). `pick` reads items and the next token from an answer.
 */
export function usePages<T, A>(
  path: string | null,
  params: Params,
  pick: (answer: A) => { items: T[]; next?: string | undefined },
): Pages<T, A> {
  const url = path === null ? null : apiUrl(path, params);
  const [state, setState] = useState<{
    url: string | null;
    items: T[];
    last?: A;
    next?: string;
    error?: Error;
    busy: boolean;
    started: boolean;
  }>({ url, items: [], busy: false, started: false });
  const abort = useRef<AbortController | undefined>(undefined);
  const pickRef = useRef(pick);
  pickRef.current = pick;

  const fetchPage = useCallback(
    (token: string | undefined, reset: boolean) => {
      if (path === null || url === null) return;
      abort.current?.abort();
      const controller = new AbortController();
      abort.current = controller;
      setState((s) =>
        reset ? { url, items: [], busy: true, started: true } : { ...s, busy: true },
      );
      apiGet<A>(path, { ...params, page_token: token }, controller.signal).then(
        (answer) => {
          const { items, next } = pickRef.current(answer);
          setState((s) => ({
            url,
            items: reset ? items : [...s.items, ...items],
            last: answer,
            ...(next === undefined ? {} : { next }),
            busy: false,
            started: true,
          }));
        },
        (error: unknown) => {
          if (!controller.signal.aborted)
            setState((s) => ({ ...s, error: error as Error, busy: false }));
        },
      );
    },
    [url],
  );

  useEffect(() => {
    fetchPage(undefined, true);
    return () => abort.current?.abort();
  }, [fetchPage]);

  const current = state.url === url;
  return {
    items: current ? state.items : [],
    ...(current && state.last !== undefined ? { last: state.last } : {}),
    ...(current && state.error !== undefined ? { error: state.error } : {}),
    loading: !current || state.busy || !state.started,
    more: current && state.next !== undefined,
    loadMore: () => {
      if (current && state.next !== undefined && !state.busy) fetchPage(state.next, false);
    },
  };
}

/** True for an API error with this status. */
export function isStatus(error: Error | undefined, status: number): boolean {
  return error instanceof ApiError && error.status === status;
}

/** The document's title while the page shows. */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Touchstone`;
  }, [title]);
}

/** Calls `onVisible` whenever the returned element scrolls into view (infinite scroll). */
export function useOnVisible(onVisible: () => void) {
  const ref = useRef<HTMLDivElement>(null);
  const callback = useRef(onVisible);
  callback.current = onVisible;
  useEffect(() => {
    const el = ref.current;
    if (el === null) return;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) callback.current();
    });
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  return ref;
}
