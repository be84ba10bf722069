import { EXIT } from './exit-codes.js';
import { CliExit } from './io.js';

/**
 * A small client for the server's REST API, used by CLI commands given `--server`.
 * Errors carry the server's error message and request id.
 */
export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string | undefined,
  ) {}

  async call<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Readonly<Record<string, string>> = {},
  ): Promise<T> {
    const url = new URL(path, this.baseUrl.endsWith('/') ? this.baseUrl : `${this.baseUrl}/`);
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.apiKey === undefined ? {} : { authorization: `Bearer ${this.apiKey}` }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
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
    if (!response.ok) {
      const e = (
        parsed as {
          error?: {
            message?: string;
            code?: string;
            requestId?: string;
            details?: { path: string; message: string }[];
          };
        }
      ).error;
      const details = (e?.details ?? []).map((d) => `\n  ${d.path}: ${d.message}`).join('');
      const hint =
        response.status === 401
          ? '\nSet TOUCHSTONE_API_KEY to an API key (touchstone keys create).'
          : '';
      throw new CliExit(
        response.status === 400 ? EXIT.USAGE : EXIT.ERROR,
        `${e?.code ?? response.status}: ${e?.message ?? 'request failed'}${details}${hint}${e?.requestId ? `\n(request id ${e.requestId})` : ''}`,
      );
    }
    return parsed as T;
  }
}
