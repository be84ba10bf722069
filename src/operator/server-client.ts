import type { Json } from './kinds.js';
import type { ServerFailure } from './reconcile.js';

/** A failed call to the Touchstone server, as reconcile.ts classifies it. */
export class ServerCallError extends Error {
  constructor(readonly failure: ServerFailure) {
    super(failure.message);
  }
}

/**
 * The operator's client of the Touchstone server's REST API, with its own API key. Every failure
 * becomes a ServerCallError: not reached (connection refused, timeout) or refused (the API's
 * status, error code and message).
 */
export class TouchstoneClient {
  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string | undefined,
    private readonly timeoutMs: number,
  ) {}

  async call(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Json> {
    const url = new URL(path, this.baseUrl.endsWith('/') ? this.baseUrl : `${this.baseUrl}/`);
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method,
        headers: {
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.apiKey === undefined ? {} : { authorization: `Bearer ${this.apiKey}` }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await response.text();
    } catch (err) {
      const cause = (err as Error).cause;
      const message = cause instanceof Error ? cause.message : (err as Error).message;
      throw new ServerCallError({ type: 'unreachable', message });
    }
    let parsed: Json = {};
    try {
      parsed = text === '' ? {} : (JSON.parse(text) as Json);
    } catch {
      if (response.ok) {
        throw new ServerCallError({
          type: 'refused',
          status: response.status,
          message: 'the answer is not JSON',
        });
      }
    }
    if (response.ok) return parsed;
    const error = (parsed.error ?? {}) as {
      code?: string;
      message?: string;
      details?: { path: string; message: string }[];
    };
    const details = (error.details ?? []).map((d) => `${d.path}: ${d.message}`).join('; ');
    const message = error.message ?? `HTTP ${response.status}`;
    throw new ServerCallError({
      type: 'refused',
      status: response.status,
      ...(error.code === undefined ? {} : { code: error.code }),
      // Many messages already state their details; say them once.
      message: details === '' || message.includes(details) ? message : `${message} (${details})`,
    });
  }
}
