import { EXIT, type ExitCode } from './exit-codes.js';
import { CliExit, withDetails } from './io.js';

/** Slices a stream hands to the connection: small enough for progress, large enough to be cheap. */
const UPLOAD_SLICE = 256 * 1024;

/** `data` as a stream that reports how much of it has been read (sent) so far. */
function counted(
  data: Buffer,
  onProgress: (sent: number, total: number) => void,
): ReadableStream<Uint8Array> {
  let sent = 0;
  onProgress(0, data.length);
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= data.length) {
        controller.close();
        return;
      }
      const slice = data.subarray(sent, sent + UPLOAD_SLICE);
      sent += slice.length;
      controller.enqueue(slice);
      onProgress(sent, data.length);
    },
  });
}

/** The credential a client sends: an API key, or the ID token of a stored sign-in. */
export interface Bearer {
  token: string;
  /** Set for a stored sign-in (touchstone login): its expiry is checked before each call. */
  signIn?: { issuer: string; expiresAt: Date };
}

/** A refusal by the server: the exit, plus the status and error code for callers that branch. */
export class ApiCallError extends CliExit {
  constructor(
    code: ExitCode,
    message: string,
    readonly status: number,
    readonly errorCode: string | undefined,
  ) {
    super(code, message);
  }
}

/**
 * A small client for the server's REST API, used by CLI commands given `--server`.
 * Errors carry the server's error message and request id.
 */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    readonly bearer: Bearer | undefined,
  ) {}

  /** A call with a JSON body (or none). */
  async call<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Readonly<Record<string, string>> = {},
  ): Promise<T> {
    return this.send<T>(
      method,
      path,
      body === undefined
        ? undefined
        : { data: JSON.stringify(body), contentType: 'application/json' },
      headers,
    );
  }

  /**
   * A call whose body is sent as it is (a file upload); the answer is JSON as for `call`.
   * `onProgress` hears the bytes handed to the connection so far.
   */
  async callRaw<T>(
    method: string,
    path: string,
    body: { data: Buffer; contentType: string },
    headers: Readonly<Record<string, string>> = {},
    onProgress?: (sent: number, total: number) => void,
  ): Promise<T> {
    return this.send<T>(
      method,
      path,
      {
        data: onProgress === undefined ? body.data : counted(body.data, onProgress),
        contentType: body.contentType,
      },
      headers,
    );
  }

  private async send<T>(
    method: string,
    path: string,
    body: { data: Buffer | string | ReadableStream<Uint8Array>; contentType: string } | undefined,
    headers: Readonly<Record<string, string>>,
  ): Promise<T> {
    const signIn = this.bearer?.signIn;
    if (signIn !== undefined && signIn.expiresAt.getTime() <= Date.now()) {
      throw new CliExit(
        EXIT.ERROR,
        `your sign-in to ${this.baseUrl} expired at ${signIn.expiresAt.toISOString()}; run touchstone login`,
      );
    }
    const url = new URL(path, this.baseUrl.endsWith('/') ? this.baseUrl : `${this.baseUrl}/`);
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          ...(body === undefined ? {} : { 'content-type': body.contentType }),
          ...(this.bearer === undefined ? {} : { authorization: `Bearer ${this.bearer.token}` }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: body.data }),
        ...(body?.data instanceof ReadableStream ? { duplex: 'half' } : {}),
      } as RequestInit);
    } catch (err) {
      throw new CliExit(
        EXIT.ERROR,
        `cannot reach the server at ${this.baseUrl} (${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}); is \`touchstone serve\` running?`,
      );
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? {} : JSON.parse(text);
    } catch {
      throw new CliExit(
        EXIT.ERROR,
        `the server answered ${response.status} with a body that is not JSON`,
      );
    }
    if (response.ok) return parsed as T;
    // REST errors are {"error": {...}}; Connect errors are {"code", "message"}.
    const answer = parsed as {
      error?: {
        message?: string;
        code?: string;
        requestId?: string;
        details?: { path: string; message: string }[];
      };
      code?: string;
      message?: string;
    };
    const e = answer.error;
    const code = e?.code ?? response.headers.get('touchstone-error-code') ?? answer.code;
    const message = e?.message ?? answer.message ?? 'request failed';

    const requestId = e?.requestId ?? response.headers.get('x-request-id');
    throw new ApiCallError(
      response.status === 400 ? EXIT.USAGE : EXIT.ERROR,
      `${code ?? response.status}: ${withDetails(message, e?.details ?? [])}${this.hint(response.status)}${requestId ? `\n(request id ${requestId})` : ''}`,
      response.status,
      code ?? undefined,
    );
  }

  /** What to do about a refused credential: sign in again, or give one. */
  private hint(status: number): string {
    if (status !== 401) return '';
    if (this.bearer?.signIn !== undefined) {
      return `\nYour sign-in to ${this.baseUrl} was refused; run touchstone login.`;
    }
    return '\nSet TOUCHSTONE_API_KEY to an API key (touchstone keys create), or run touchstone login.';
  }
}
