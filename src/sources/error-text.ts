import { isTouchstoneError } from '../core/index.js';

/**
 * What a source says about a failure, in its status and in the log. Connector messages are safe
 * by construction (host, operation, status), but the spec's redaction rule 7 puts connector error
 * logs and stored source errors under the text rules of `traces.redaction` anyway (a host name or
 * an account id in a path may be something the operator redacts).
 */

export type RedactText = (text: string) => string;

/**
 * A safe, short text for a failure of `what` (`pull`): TouchstoneErrors carry safe messages;
 * others may not, so only their type is named.
 */
export function failureText(err: unknown, what: string, redact: RedactText): string {
  if (isTouchstoneError(err)) return redact(`${err.code}: ${err.message}`).slice(0, 500);
  return `${what} failed (${err instanceof Error ? err.name : typeof err}); see the server log`;
}

/** The error as a log field: its kind and code, message and stack through the text rules. */
export function loggedError(err: unknown, redact: RedactText): Record<string, string> {
  if (!(err instanceof Error)) return { type: typeof err };
  return {
    type: err.name,
    ...(isTouchstoneError(err) ? { code: err.code } : {}),
    message: redact(err.message),
    ...(err.stack === undefined ? {} : { stack: redact(err.stack) }),
  };
}
