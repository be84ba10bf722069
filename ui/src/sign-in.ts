import { ApiError, errorOf, saveIdToken } from './api.js';
import { BASE } from './router.js';

/**
 * Signing in at the identity provider (`ui.sign_in`): the authorization code flow with PKCE
 * (S256), run by the page as a public client. The verifier, `state` and `nonce` are random,
 * kept in this tab's sessionStorage while the person is at the provider, and checked when the
 * provider sends them back; the server exchanges the code (it holds no secret either) and answers
 * the ID token only. There is no refresh: when the token expires the tab signs in again.
 */

/** What `GET /ui/login/config` answers when the server signs people in at a provider. */
export interface SignInConfig {
  issuer: string;
  client_id: string;
  scopes: string[];
  authorization_endpoint: string;
}

/** A sign-in that could not complete, in words for the sign-in page. */
export class SignInError extends Error {}

const PENDING_ITEM = 'touchstone.signIn';

/** What the tab remembers while the person is at the provider. */
interface Pending {
  state: string;
  nonce: string;
  verifier: string;
  redirectUri: string;
  /** The page to go back to (a /ui/ path and query). */
  returnTo: string;
}

/** The provider's sign-in, or null on a server of API keys only (the key prompt then). */
export async function signInConfig(): Promise<SignInConfig | null> {
  const res = await fetch(`${BASE}/login/config`, {
    headers: { accept: 'application/json' },
    credentials: 'omit',
    cache: 'no-store',
  });
  if (res.ok) return (await res.json()) as SignInConfig;
  const error = await errorOf(res);
  if (error.code === 'UI_SIGN_IN_NOT_CONFIGURED') return null;
  throw error;
}

function base64url(bytes: Uint8Array): string {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** 32 random bytes, base64url: 43 characters (a PKCE verifier's shortest, and plenty for state). */
function randomText(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function s256(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

/** Sends the person to the provider; they come back to `<origin>/ui/` with a code. */
export async function startSignIn(config: SignInConfig): Promise<void> {
  const pending: Pending = {
    state: randomText(),
    nonce: randomText(),
    verifier: randomText(),
    redirectUri: `${window.location.origin}${BASE}/`,
    returnTo: window.location.pathname + window.location.search,
  };
  const url = new URL(config.authorization_endpoint);
  const params = {
    client_id: config.client_id,
    response_type: 'code',
    scope: config.scopes.join(' '),
    redirect_uri: pending.redirectUri,
    state: pending.state,
    nonce: pending.nonce,
    code_challenge: await s256(pending.verifier),
    code_challenge_method: 'S256',
  };
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  sessionStorage.setItem(PENDING_ITEM, JSON.stringify(pending));
  window.location.assign(url.toString());
}

/** The sign-in this tab started, read once (a second answer to it is refused). */
function takePending(): Pending | null {
  const raw = sessionStorage.getItem(PENDING_ITEM);
  sessionStorage.removeItem(PENDING_ITEM);
  try {
    return raw === null ? null : (JSON.parse(raw) as Pending);
  } catch {
    return null;
  }
}

/** Only a page of the UI: never another origin (`//host`) or path. */
function safeReturn(path: string): string {
  return path.startsWith(`${BASE}/`) && !path.startsWith('//') ? path : `${BASE}/`;
}

function claimsOf(idToken: string): Record<string, unknown> {
  try {
    const part = (idToken.split('.')[1] ?? '').replaceAll('-', '+').replaceAll('_', '/');
    return JSON.parse(atob(part)) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/**
 * Completes a sign-in when the provider has sent the person back (`?code&state`, or `?error`):
 * checks `state`, has the server exchange the code, checks the ID token's `nonce` (the server
 * verified its signature), keeps the token, and returns to the page the sign-in started from.
 * Returns false when the URL is no answer of a provider. The code leaves the address bar first.
 */
export async function completeSignIn(): Promise<boolean> {
  const params = new URLSearchParams(window.location.search);
  const state = params.get('state');
  const code = params.get('code');
  const error = params.get('error');
  if (state === null || (code === null && error === null)) return false;
  const pending = takePending();
  history.replaceState(null, '', `${BASE}/`);
  if (pending === null || pending.state !== state) {
    throw new SignInError(
      'The answer from the identity provider does not belong to a sign-in started in this tab (its state does not match), so it was not used. Sign in again.',
    );
  }
  if (error !== null) {
    const named = /^[A-Za-z0-9_.-]{1,64}$/.test(error) ? error : 'an unnamed error';
    throw new SignInError(`The identity provider did not sign you in (${named}).`);
  }
  const res = await fetch(`${BASE}/login/token`, {
    method: 'POST',
    headers: { accept: 'application/json', 'content-type': 'application/json' },
    body: JSON.stringify({
      code,
      code_verifier: pending.verifier,
      redirect_uri: pending.redirectUri,
    }),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (!res.ok) throw await errorOf(res);
  const answer = (await res.json()) as { id_token: string; expires_at: string };
  if (claimsOf(answer.id_token).nonce !== pending.nonce) {
    throw new SignInError(
      'The ID token is not the answer to this sign-in (its nonce does not match), so it was not used. Sign in again.',
    );
  }
  saveIdToken({ token: answer.id_token, expiresAt: Date.parse(answer.expires_at) });
  history.replaceState(null, '', safeReturn(pending.returnTo));
  return true;
}

/** Why a sign-in failed, for the page (the server's message and request id when it refused). */
export function signInFailure(err: unknown): { message: string; requestId?: string } {
  if (err instanceof ApiError) {
    return {
      message: err.message,
      ...(err.requestId === undefined ? {} : { requestId: err.requestId }),
    };
  }
  if (err instanceof SignInError) return { message: err.message };
  return { message: 'The server could not be reached; try again.' };
}
