/**
 * @module net
 * The one outbound HTTP client of the product: every call to a judge, trace store or webhook
 * goes through `createHttpClient` (undici Agent owned here; timeouts, size caps, no redirects,
 * Retry-After), plus the credential resolver. The SSRF guard (`createOutboundGuard`) plugs into
 * its `checkTarget` and `wrapConnector` seams. Imports only `core`; must not import any other
 * area, and nothing here reads `process.env` (the environment is handed in).
 */
export { type CredentialRef, resolveCredential } from './credentials.js';
export { NetErrors } from './error-codes.js';
export {
  type Connector,
  createHttpClient,
  type HttpClient,
  type HttpClientOptions,
  type HttpMethod,
  type HttpRequest,
  type HttpResponse,
} from './http-client.js';
export {
  addressRefusal,
  createOutboundGuard,
  type OutboundGuard,
  type OutboundPolicy,
  type ResolvedAddress,
  type Resolver,
} from './outbound-guard.js';
export { parseRetryAfter } from './retry-after.js';
