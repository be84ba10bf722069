import type { ComponentChildren } from 'preact';
import { ApiError } from '../api.js';

export function Loading({ what }: { what: string }) {
  return (
    <p class="loading" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

/** An API error in words: what it means for the user, then the server's own message. */
export function ErrorNote({ error, what }: { error: Error; what: string }) {
  let title = `Could not load ${what}`;
  if (error instanceof ApiError) {
    if (error.status === 403) title = `This key may not read ${what}`;
    else if (error.status === 404) title = `Not found: ${what}`;
    else if (error.status === 401) title = 'The server refused the key';
    else if (error.status === 400) title = `The server refused the request for ${what}`;
  }
  return (
    <div class="error-note" role="alert">
      <strong>{title}.</strong> <span>{error.message}</span>
      {error instanceof ApiError && error.requestId !== undefined && (
        <span class="muted"> (request {error.requestId})</span>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}
