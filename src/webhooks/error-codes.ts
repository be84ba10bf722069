import { defineErrors } from '../core/index.js';

export const WebhookErrors = defineErrors({
  WEBHOOK_INVALID: {
    kind: 'invalid_argument',
    doc: 'The webhook is malformed: `details` names each field (a URL that is not http or https, unknown event names, a secret shorter than 16 characters).',
  },
  WEBHOOK_URL_REFUSED: {
    kind: 'invalid_argument',
    doc: 'The webhook URL points at a loopback, private, link-local or metadata address; use a public receiver or list the host in `webhooks.allow_hosts`.',
  },
  WEBHOOK_NOT_FOUND: {
    kind: 'not_found',
    doc: 'No webhook with that name in the project.',
  },
  WEBHOOK_DISABLED: {
    kind: 'failed_precondition',
    doc: 'The webhook is disabled, so it sends nothing (not even a test ping); apply it with `disabled: false` first.',
  },
});
