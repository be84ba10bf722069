import { EXIT } from './exit-codes.js';
import { CliExit } from './io.js';

/**
 * A small client for the server's REST API, used by CLI commands given `--server`.
 * Errors carry the server's error message and request id.
 */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string | undefined,
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

  /** A call whose body is sent as it is (a file upload); the answer is JSON as for `call`. */
  async callRaw<T>(
    method: string,
    path: string,
    body: { data: Buffer | string; contentType: string },
    headers: Readonly<Record<string, string>> = {},
  ): Promise<T> {
    return this.send<T>(method, path, body, headers);
  }

  private async send<T>(
    method: string,
    path: string,
    body: { data: Buffer | string; contentType: string } | undefined,
    headers: Readonly<Record<string, string>>,
  ): Promise<T> {
    const url = new URL(path, this.baseUrl.endsWith('/') ? this.baseUrl : `${this.baseUrl}/`);
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          ...(body === undefined ? {} : { 'content-type': body.contentType }),
          ...(this.apiKey === undefined ? {} : { authorization: `Bearer ${this.apiKey}` }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: body.data }),
      });
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
    const details = (e?.details ?? []).map((d) => `\n  ${d.path}: ${d.message}`).join('');
    const requestId = e?.requestId ?? response.headers.get('x-request-id');
    const hint =
      response.status === 401
        ? '\nSet TOUCHSTONE_API_KEY to an API key (touchstone keys create).'
        : '';
    throw new CliExit(
      response.status === 400 ? EXIT.USAGE : EXIT.ERROR,
      `${code ?? response.status}: ${message}${details}${hint}${requestId ? `\n(request id ${requestId})` : ''}`,
    );
  }
}
