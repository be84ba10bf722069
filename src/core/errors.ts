/**
 * The one error type domain code throws. It carries a gRPC/Connect-style `kind`, a stable `code`
 * from a catalogue, whether a retry can help, and details that are safe to show a caller. It never
 * names an HTTP status: `api/errors.ts` maps kinds to statuses.
 */

export const ERROR_KINDS = [
  'invalid_argument',
  'failed_precondition',
  'not_found',
  'already_exists',
  'aborted',
  'permission_denied',
  'unauthenticated',
  'resource_exhausted',
  'unavailable',
  'deadline_exceeded',
  'unimplemented',
  'internal',
  'payload_too_large',
  'unsupported_media_type',
] as const;

export type ErrorKind = (typeof ERROR_KINDS)[number];

/** One problem in a request, located by a path such as `records[3].reference`. */
export interface ErrorDetail {
  path: string;
  message: string;
}

export interface ErrorOptions {
  details?: ErrorDetail[];
  /** Seconds a caller should wait before retrying (retryable errors only). */
  retryAfterSeconds?: number;
  cause?: unknown;
}

/**
 * Marks a TouchstoneError. `Symbol.for` gives every copy of this module the same symbol, so an
 * error thrown by one copy (tests loading both src/ and dist/, a plug-in bundling its own) is
 * still recognized by another, where `instanceof` would say no.
 */
const BRAND: unique symbol = Symbol.for('touchstone.error');

export class TouchstoneError extends Error {
  override readonly name = 'TouchstoneError';
  /** On the prototype, not the instance: the brand is not an enumerable field of the error. */
  get [BRAND](): true {
    return true;
  }
  readonly kind: ErrorKind;
  readonly code: string;
  readonly retryable: boolean;
  readonly details: ErrorDetail[];
  readonly retryAfterSeconds: number | undefined;

  constructor(def: ErrorDefinition, message: string, options: ErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = def.kind;
    this.code = def.code;
    this.retryable = def.retryable;
    this.details = options.details ?? [];
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

export interface ErrorDefinition {
  readonly code: string;
  readonly kind: ErrorKind;
  readonly retryable: boolean;
  /** One sentence for docs/errors.md: when it happens and what to do. */
  readonly doc: string;
}

/** A catalogue entry that also builds its error: `throw E.FOO('message', {details})`. */
export type ErrorFactory = ErrorDefinition &
  ((message: string, options?: ErrorOptions) => TouchstoneError);

interface ErrorSpec {
  kind: ErrorKind;
  retryable?: boolean;
  doc: string;
}

const catalogue = new Map<string, ErrorDefinition>();

/**
 * Declares an area's error codes. Codes are global: declaring one twice is a programming error.
 * Every declared code must appear in docs/errors.md (a test checks it).
 */
export function defineErrors<const T extends Record<string, ErrorSpec>>(
  specs: T,
): { [K in keyof T]: ErrorFactory } {
  const out: Record<string, ErrorFactory> = {};
  for (const [code, spec] of Object.entries(specs)) {
    if (catalogue.has(code)) throw new Error(`error code ${code} declared twice`);
    const def: ErrorDefinition = {
      code,
      kind: spec.kind,
      retryable: spec.retryable ?? false,
      doc: spec.doc,
    };
    catalogue.set(code, def);
    const factory = (message: string, options?: ErrorOptions) =>
      new TouchstoneError(def, message, options);
    out[code] = Object.assign(factory, def);
  }
  return out as { [K in keyof T]: ErrorFactory };
}

/** Every code declared so far (the docs test imports all areas first). */
export function declaredErrors(): ErrorDefinition[] {
  return [...catalogue.values()];
}

/** True for a TouchstoneError from any copy of this module (never use `instanceof`). */
export function isTouchstoneError(err: unknown): err is TouchstoneError {
  return typeof err === 'object' && err !== null && (err as { [BRAND]?: unknown })[BRAND] === true;
}

/**
 * Whether `err` is a TouchstoneError of this catalogue entry: how code branches on an error,
 * with the code named by its catalogue constant, never as a string.
 */
export function isError(err: unknown, def: Pick<ErrorDefinition, 'code'>): err is TouchstoneError {
  return isTouchstoneError(err) && err.code === def.code;
}

/** Errors every area may raise. */
export const CoreErrors = defineErrors({
  INVALID_ARGUMENT: {
    kind: 'invalid_argument',
    doc: 'The request is malformed or a field has a wrong value; `details` names each field.',
  },
  NOT_FOUND: {
    kind: 'not_found',
    doc: 'The named resource does not exist in the project, or the caller may not see it.',
  },
  ALREADY_EXISTS: { kind: 'already_exists', doc: 'A resource with that identity already exists.' },
  FAILED_PRECONDITION: {
    kind: 'failed_precondition',
    doc: 'The resource is not in a state that allows the operation.',
  },
  INTERNAL: {
    kind: 'internal',
    doc: 'An unexpected failure; the server log has the full error under the request id.',
  },
  UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: 'A dependency (database, remote store) is unavailable; retry after `Retry-After`.',
  },
  UNIMPLEMENTED: { kind: 'unimplemented', doc: 'The operation is not supported by this server.' },
});
