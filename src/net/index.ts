/**
 * @module net
 * The one outbound HTTP client of the product: every call to a judge, trace store or webhook
 * goes through `createHttpClient` (undici Agents owned here; timeouts, size caps, redirects only
 * when asked and checked hop by hop, Retry-After, the environment proxy), plus the credential
 * resolver and grants, and the AWS SigV4 signer (S3, SageMaker). The SSRF guard (`createOutboundGuard`) plugs into its `checkTarget` and
 * `wrapConnector` seams. Imports only `core`; must not import any other area, and nothing here
 * reads `process.env` (the environment and proxy settings are handed in).
 */
export { type AwsSignerOptions, awsSigner } from './aws-sigv4.js';
export {
  type CredentialGrant,
  type CredentialRef,
  type CredentialResolver,
  type CredentialResolverOptions,
  createCredentialResolver,
  credentialGrantKey,
  describeCredential,
  type EnvCredentialRef,
  type FileCredentialRef,
  resolveCredential,
} from './credentials.js';
export { CredentialErrors, NetErrors } from './error-codes.js';
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
  compileHostPatterns,
  createOutboundGuard,
  type HostPatterns,
  type OutboundGuard,
  type OutboundPolicy,
  type ResolvedAddress,
  type Resolver,
} from './outbound-guard.js';
export {
  createProxyRouter,
  type ProxyRouter,
  type ProxySettings,
  proxySettingsFromConfig,
} from './proxy.js';
export { parseRetryAfter } from './retry-after.js';
export { isRetryableStatus } from './retryable-status.js';
