/**
 * @module client
 * The TypeScript client for Touchstone's API, for code that talks to a Touchstone server or
 * receives its webhooks. Imports nothing from the server (only Node built-ins), so it can ship on
 * its own. Import it as `touchstone/client`.
 */
export {
  type VerifyWebhookOptions,
  verifyWebhookSignature,
  WebhookSignatureError,
  type WebhookSignatureFailure,
} from './webhook-signature.js';
