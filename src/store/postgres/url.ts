import { StoreErrors } from '../error-codes.js';

/**
 * Checks `store.url` and describes it as `host:port/database` for messages and logs. The URL is
 * never echoed: it may carry a password, in the user part or as a `password` query parameter.
 */
export function describePostgresUrl(url: string): string {
  const parsed = parseLikePg(url);
  if (parsed === undefined) {
    throw StoreErrors.STORE_CONFIG_INVALID(
      'store.url is not a valid URL; expected postgres://user:password@host:port/database',
    );
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw StoreErrors.STORE_CONFIG_INVALID(
      `store.url must start with postgres:// or postgresql://, not ${parsed.protocol}//`,
    );
  }
  const host =
    parsed.searchParams.get('host') ??
    (parsed.hostname === '' || parsed.hostname === DUMMY_HOST ? 'localhost' : parsed.hostname);
  const port = parsed.searchParams.get('port') ?? (parsed.port === '' ? '5432' : parsed.port);
  const database =
    safeDecode(parsed.pathname.slice(1)) || safeDecode(parsed.username) || 'postgres';
  return `${host}:${port}/${database}`;
}

const DUMMY_HOST = 'dummy.invalid';

/**
 * Accepts what pg's own parser accepts: unencoded spaces, and an empty host with credentials
 * (`postgres://u:p@/db?host=/run/postgresql`), which WHATWG URL rejects.
 */
function parseLikePg(url: string): URL | undefined {
  const text = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(url)
    ? encodeURI(url).replace(/%25(\d\d)/g, '%$1')
    : url;
  for (const candidate of [text, text.replace('@/', `@${DUMMY_HOST}/`)]) {
    try {
      return new URL(candidate);
    } catch {
      // try the next form
    }
  }
  return undefined;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
