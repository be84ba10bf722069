/**
 * The UI's only way to the server: the public REST API (/v1alpha1/…), so whatever the UI shows, a
 * script can read too. The credential (an API key, or the ID token of a sign-in at the identity
 * provider) lives in this tab's sessionStorage (never in a URL or localStorage) and goes out as a
 * bearer token. A server that does not answer is retried with back-off while a banner says so; a
 * refused credential sends the user back to the key prompt or the sign-in page.
 */

const KEY_ITEM = 'touchstone.apiKey';
const ID_TOKEN_ITEM = 'touchstone.idToken';

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY_ITEM);
}

export function saveKey(key: string): void {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY_ITEM);
}

/** An ID token from the identity provider, and when it expires (ms since the epoch). */
export interface IdToken {
  token: string;
  expiresAt: number;
}

export function storedIdToken(): IdToken | null {
  try {
    const value = JSON.parse(sessionStorage.getItem(ID_TOKEN_ITEM) ?? 'null') as IdToken | null;
    return typeof value?.token === 'string' && typeof value.expiresAt === 'number' ? value : null;
  } catch {
    return null;
  }
}

export function saveIdToken(token: IdToken): void {
  sessionStorage.setItem(ID_TOKEN_ITEM, JSON.stringify(token));
}

/** Drops whichever credential the tab holds (sign out, or one the server refused). */
export function forgetCredentials(): void {
  forgetKey();
  sessionStorage.removeItem(ID_TOKEN_ITEM);
}

/** The bearer to send: the key, else an ID token that has not expired (tokens are not refreshed). */
function bearer(): string | null {
  const key = storedKey();
  if (key !== null) return key;
  const id = storedIdToken();
  return id !== null && id.expiresAt > Date.now() ? id.token : null;
}

function authorization(): Record<string, string> {
  const token = bearer();
  return token === null ? {} : { authorization: `Bearer ${token}` };
}

/** An error answer of the API: its status and the error body's code and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId?: string,
  ) {
    super(message);
  }
}

/** What the connection banner shows; listeners are told of every change. */
export interface ConnectionState {
  down: boolean;
  /** Seconds until the next attempt while down. */
  retryIn: number;
}

let connection: ConnectionState = { down: false, retryIn: 0 };
const connectionListeners = new Set<(s: ConnectionState) => void>();
const unauthenticatedListeners = new Set<(message: string) => void>();

export function onConnection(listener: (s: ConnectionState) => void): () => void {
  connectionListeners.add(listener);
  listener(connection);
  return () => connectionListeners.delete(listener);
}

/** Called when the server refuses the credentials (absent, revoked, expired). */
export function onUnauthenticated(listener: (message: string) => void): () => void {
  unauthenticatedListeners.add(listener);
  return () => unauthenticatedListeners.delete(listener);
}

function setConnection(next: ConnectionState): void {
  if (next.down === connection.down && next.retryIn === connection.retryIn) return;
  connection = next;
  for (const l of connectionListeners) l(connection);
}

export type Params = Record<string, string | readonly string[] | undefined>;

/** `?a=1&b=x&b=y` for these parameters (repeated ones repeated, empty ones left out), or ''. */
export function queryString(params: Params): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined || value === '') continue;
    for (const v of typeof value === 'string' ? [value] : value) query.append(name, v);
  }
  const text = query.toString();
  return text === '' ? '' : `?${text}`;
}

export function apiUrl(path: string, params: Params = {}): string {
  return `${path}${queryString(params)}`;
}

/** Statuses that mean "the server (or a proxy before it) is not there right now". */
const UNREACHABLE = new Set([502, 503, 504]);
const MAX_BACKOFF_S = 15;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
}

export async function errorOf(res: Response): Promise<ApiError> {
  let code = `HTTP_${res.status}`;
  let message = `the server answered HTTP ${res.status}`;
  let requestId: string | undefined;
  try {
    const body = (await res.json()) as {
      error?: { code?: string; message?: string; requestId?: string };
    };
    if (body.error?.code !== undefined) code = body.error.code;
    if (body.error?.message !== undefined) message = body.error.message;
    requestId = body.error?.requestId;
  } catch {
    // Not our JSON error body (a proxy's page): the status says enough.
  }
  return new ApiError(res.status, code, message, requestId);
}

/**
 * GETs a JSON resource. While the server cannot be reached (network error, 502–504 from a proxy
 * or a server shutting down) the request is retried with back-off and the banner shows it; it
 * never gives up, but stops when `signal` aborts (the page went away).
 */
export async function apiGet<T>(path: string, params?: Params, signal?: AbortSignal): Promise<T> {
  const url = apiUrl(path, params);
  let backoff = 1;
  for (;;) {
    let res: Response | undefined;
    try {
      res = await fetch(url, {
        headers: { accept: 'application/json', ...authorization() },
        credentials: 'omit',
        cache: 'no-store',
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (err) {
      if (signal?.aborted) throw err;
    }
    if (res !== undefined && !UNREACHABLE.has(res.status)) {
      setConnection({ down: false, retryIn: 0 });
      if (res.ok) return (await res.json()) as T;
      const error = await errorOf(res);
      if (res.status === 401) for (const l of unauthenticatedListeners) l(error.message);
      throw error;
    }
    for (let left = backoff; left > 0; left--) {
      setConnection({ down: true, retryIn: left });
      await sleep(1000, signal);
    }
    backoff = Math.min(MAX_BACKOFF_S, backoff * 2);
  }
}

/** Who the credentials act as (`GET /v1alpha1/whoami`). */
export interface Session {
  kind: 'key' | 'oidc' | 'open';
  /** The name writes are recorded under (`oidc:<issuer>#<sub>` for a signed-in person). */
  principal: string;
  keyId?: string;
  /** A signed-in person's `sub`, email and groups. */
  subject?: string;
  email?: string;
  groups?: string[];
  project?: string;
  roles: string[];
  permissions: string[];
  scope?: { services?: string[]; labels?: Record<string, string> };
  projects: string[];
}

/** What the stored key (or no key) acts as; a refused key also tells the 401 listeners. */
export async function whoami(signal?: AbortSignal): Promise<Session> {
  return apiGet<Session>('/v1alpha1/whoami', undefined, signal);
}

/**
 * POSTs JSON once (a write is never retried behind the user's back). `idempotencyKey` makes a
 * retry the user asks for safe: the server answers it with the first outcome.
 */
export async function apiPost<T>(
  path: string,
  params: Params,
  body: unknown,
  idempotencyKey: string,
): Promise<T> {
  const res = await fetch(apiUrl(path, params), {
    method: 'POST',
    headers: {
      accept: 'application/json',
      'content-type': 'application/json',
      'idempotency-key': idempotencyKey,
      ...authorization(),
    },
    body: JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (res.ok) return (await res.json()) as T;
  const error = await errorOf(res);
  if (res.status === 401) for (const l of unauthenticatedListeners) l(error.message);
  throw error;
}
