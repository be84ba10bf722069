import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isSecureOrLoopback, proxyEnvLayer } from '../config/index.js';
import { isTouchstoneError } from '../core/index.js';
import {
  createHttpClient,
  createOutboundGuard,
  type HttpClient,
  type HttpRequest,
  type HttpResponse,
  proxySettingsFromConfig,
} from '../net/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit } from './io.js';
import {
  authorizeUrl,
  type BrowserRequest,
  callbackCode,
  chooseFlow,
  devicePollStep,
  discoveryUrl,
  type Flow,
  idTokenOf,
  type ProviderMetadata,
  printable,
  providerError,
  providerMetadata,
  randomToken,
  type SignedInIdentity,
} from './sign-in.js';

/**
 * The OAuth flows of `touchstone login` against the provider: discovery, the device flow
 * (RFC 8628) and the authorization code flow with PKCE on a loopback redirect (RFC 8252). Every
 * request goes through the outbound client: the issuer's own host may be loopback or private
 * (the user named it), any other host the provider names must be public https.
 */

/** Deadline of one request to the provider. */
const PROVIDER_TIMEOUT_MS = 10_000;
/** Largest answer read from the provider (discovery, tokens). */
const PROVIDER_MAX_BYTES = 256 * 1024;
/** How long the browser flow waits for the provider to redirect back. */
export const CALLBACK_TIMEOUT_MS = 5 * 60_000;
/** RFC 8628 §3.5: the polling interval when the provider names none. */
const DEFAULT_INTERVAL_SECONDS = 5;
/** How often the device flow says it is still waiting. */
const WAITING_NOTE_MS = 30_000;

export interface SignInRequest {
  issuer: string;
  clientId: string;
  scope: string;
  flow: Flow | undefined;
  /** Open the system browser (browser flow); the URL is printed either way. */
  openBrowser: boolean;
  env: Record<string, string | undefined>;
  stderr: NodeJS.WritableStream;
}

/** Signs in at the provider and returns the checked ID token (nothing else is kept). */
export async function signIn(request: SignInRequest): Promise<SignedInIdentity> {
  const http = providerClient(request.issuer, request.env);
  try {
    const discovery = await getJson(http, discoveryUrl(request.issuer), 'discovery document');
    if (discovery.status !== 200) {
      throw new CliExit(
        EXIT.ERROR,
        `${discoveryUrl(request.issuer)} answered ${discovery.status}; is --issuer the provider's issuer URL?`,
      );
    }
    const provider = providerMetadata(request.issuer, discovery.body);
    const flow = chooseFlow(request.flow, provider);
    return flow === 'device'
      ? await deviceFlow(http, provider, request)
      : await browserFlow(http, provider, request);
  } finally {
    await http.close();
  }
}

function providerClient(issuer: string, env: Record<string, string | undefined>): HttpClient {
  const guard = createOutboundGuard({
    allowHosts: [new URL(issuer).hostname],
    requireHttps: true,
    setting: '--issuer',
  });
  const { proxy } = proxyEnvLayer(env) as { proxy?: Record<string, string> };
  return createHttpClient({
    userAgent: 'touchstone-cli',
    ...guard,
    timeoutMs: PROVIDER_TIMEOUT_MS,
    maxResponseBytes: PROVIDER_MAX_BYTES,
    proxy: proxySettingsFromConfig(proxy),
  });
}

interface JsonAnswer {
  status: number;
  body: Record<string, unknown>;
}

function parseAnswer(status: number, raw: Buffer, what: string): JsonAnswer {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new CliExit(
      EXIT.ERROR,
      `the provider's ${what} answered ${status} with a body that is not JSON`,
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new CliExit(
      EXIT.ERROR,
      `the provider's ${what} answered ${status} with JSON that is not an object`,
    );
  }
  return { status, body: body as Record<string, unknown> };
}

/** One request to the provider; a failure to get an answer names which endpoint it was. */
async function ask(http: HttpClient, request: HttpRequest, what: string): Promise<JsonAnswer> {
  let res: HttpResponse;
  try {
    res = await http.request(request);
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    throw new CliExit(EXIT.ERROR, `cannot reach the provider's ${what}: ${err.message}`);
  }
  return parseAnswer(res.status, res.body, what);
}

function getJson(http: HttpClient, url: string, what: string): Promise<JsonAnswer> {
  return ask(http, { method: 'GET', url, headers: { accept: 'application/json' } }, what);
}

function postForm(
  http: HttpClient,
  url: string,
  form: Record<string, string>,
  what: string,
): Promise<JsonAnswer> {
  return ask(
    http,
    {
      method: 'POST',
      url,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form).toString(),
    },
    what,
  );
}

/** A URL the provider gave for people to open: printed only when it is http(s) and printable. */
function printableUrl(value: unknown): string | undefined {
  const text = printable(value);
  if (text === undefined) return undefined;
  try {
    return isSecureOrLoopback(new URL(text)) ? text : undefined;
  } catch {
    return undefined;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function deviceFlow(
  http: HttpClient,
  provider: ProviderMetadata,
  request: SignInRequest,
): Promise<SignedInIdentity> {
  const { status, body } = await postForm(
    http,
    provider.deviceAuthorizationEndpoint as string,
    { client_id: request.clientId, scope: request.scope },
    'device authorization endpoint',
  );
  if (status !== 200) {
    throw new CliExit(
      EXIT.ERROR,
      `the provider refused the device sign-in (${status} ${providerError(body.error)}); check --client-id, or use --flow browser`,
    );
  }
  // Google names it verification_url, as an early draft of RFC 8628 did.
  const verify = printableUrl(body.verification_uri ?? body.verification_url);
  const complete = printableUrl(body.verification_uri_complete);
  const userCode = printable(body.user_code, 64);
  if (typeof body.device_code !== 'string' || userCode === undefined || verify === undefined) {
    throw new CliExit(
      EXIT.ERROR,
      'the provider answered the device sign-in without a usable device code, user code or https verification URI',
    );
  }
  const expiresIn = typeof body.expires_in === 'number' ? body.expires_in : 600;
  let interval =
    typeof body.interval === 'number' && body.interval > 0
      ? body.interval
      : DEFAULT_INTERVAL_SECONDS;
  const out = request.stderr;
  out.write(`touchstone: to sign in, open ${verify} and enter the code ${userCode}\n`);
  if (complete !== undefined) out.write(`touchstone: (or open ${complete})\n`);
  out.write('touchstone: waiting for the code to be approved…\n');
  const deadline = Date.now() + expiresIn * 1000;
  let lastNote = Date.now();
  for (;;) {
    await sleep(interval * 1000);
    if (Date.now() >= deadline) {
      throw new CliExit(
        EXIT.ERROR,
        'the code expired before it was approved; run touchstone login again',
      );
    }
    const answer = await postForm(
      http,
      provider.tokenEndpoint,
      {
        grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
        device_code: body.device_code,
        client_id: request.clientId,
      },
      'token endpoint',
    );
    const step = devicePollStep(answer.status, answer.body, interval);
    if (step.kind === 'token') {
      return idTokenOf(step.body, {
        issuer: provider.issuer,
        clientId: request.clientId,
        now: new Date(),
      });
    }
    interval = step.intervalSeconds;
    if (step.slowedDown) {
      out.write(`touchstone: the provider asked to be asked less often: every ${interval} s\n`);
    }
    if (Date.now() - lastNote >= WAITING_NOTE_MS) {
      lastNote = Date.now();
      const left = Math.max(0, Math.round((deadline - Date.now()) / 60_000));
      out.write(
        `touchstone: still waiting for the code ${userCode} to be approved (it expires in ${left} min)\n`,
      );
    }
  }
}

async function browserFlow(
  http: HttpClient,
  provider: ProviderMetadata,
  request: SignInRequest,
): Promise<SignedInIdentity> {
  const listener = await listenOnLoopback();
  try {
    const sent: BrowserRequest = {
      redirectUri: listener.redirectUri,
      state: randomToken(),
      nonce: randomToken(),
      verifier: randomToken(48),
    };
    const url = authorizeUrl(provider, request.clientId, request.scope, sent);
    request.stderr.write(`touchstone: to sign in, open ${url}\n`);
    if (request.openBrowser) openInBrowser(url);
    request.stderr.write('touchstone: waiting for the provider to send you back here…\n');
    const callback = await listener.next(CALLBACK_TIMEOUT_MS);
    let code: string;
    try {
      code = callbackCode(callback.query, sent.state, provider.issuer);
    } catch (err) {
      callback.answer(400, `Touchstone sign-in refused: ${(err as Error).message}\n`);
      throw err;
    }
    callback.answer(200, 'Signed in to Touchstone. You can close this window.\n');
    const answer = await postForm(
      http,
      provider.tokenEndpoint,
      {
        grant_type: 'authorization_code',
        code,
        redirect_uri: sent.redirectUri,
        client_id: request.clientId,
        code_verifier: sent.verifier,
      },
      'token endpoint',
    );
    if (answer.status !== 200) {
      throw new CliExit(
        EXIT.ERROR,
        `the provider's token endpoint answered ${answer.status}: ${providerError(answer.body.error)}`,
      );
    }
    return idTokenOf(answer.body, {
      issuer: provider.issuer,
      clientId: request.clientId,
      nonce: sent.nonce,
      now: new Date(),
    });
  } finally {
    listener.close();
  }
}

interface Callback {
  query: URLSearchParams;
  answer(status: number, text: string): void;
}

/**
 * A listener on 127.0.0.1 (a random port) for the provider's redirect to `/callback`. The first
 * callback is handed on; any other path answers 404, and callbacks after the first 409.
 */
async function listenOnLoopback(): Promise<{
  redirectUri: string;
  next(timeoutMs: number): Promise<Callback>;
  close(): void;
}> {
  let deliver: (callback: Callback) => void = () => {};
  const arrived = new Promise<Callback>((resolve) => {
    deliver = resolve;
  });
  let taken = false;
  const server = createServer((req, res) => {
    const text = (status: number, body: string) =>
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method !== 'GET' || url.pathname !== '/callback') return text(404, 'Not found.\n');
    if (taken) return text(409, 'This sign-in is already done.\n');
    taken = true;
    deliver({ query: url.searchParams, answer: text });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  let timer: NodeJS.Timeout | undefined;
  return {
    redirectUri: `http://127.0.0.1:${port}/callback`,
    next: (timeoutMs) =>
      Promise.race([
        arrived,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new CliExit(
                  EXIT.ERROR,
                  `no sign-in came back within ${timeoutMs / 60_000} min; run touchstone login again`,
                ),
              ),
            timeoutMs,
          );
        }),
      ]),
    close() {
      clearTimeout(timer);
      // The answer already written still reaches the browser; idle connections go now.
      server.close();
      server.closeIdleConnections();
    },
  };
}

/** Opens `url` in the system browser; a failure only means the user opens the printed URL. */
function openInBrowser(url: string): void {
  const [command, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['rundll32', ['url.dll,FileProtocolHandler', url]]
        : ['xdg-open', [url]];
  const child = spawn(command, args, { stdio: 'ignore', detached: true });
  child.on('error', () => undefined);
  child.unref();
}
