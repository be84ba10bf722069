import { defineErrors } from '../../core/index.js';

/**
 * Errors of run targets. Messages name the target kind, host, program or field, never the record's
 * content, a header value or a credential; a failing command's stderr appears only as a short
 * excerpt with granted variable values masked.
 */
export const TargetErrors = defineErrors({
  TARGET_INVALID: {
    kind: 'invalid_argument',
    doc: 'The run spec’s `target`, `harness` or `environment` is malformed; `details` names each field.',
  },
  TARGET_COMMAND_DISABLED: {
    kind: 'failed_precondition',
    doc: 'A `command` target runs a program on the machine executing the run, which a server does not do for API callers; run the spec with `touchstone run -f` without `--server`.',
  },
  TARGET_INPUT_INVALID: {
    kind: 'invalid_argument',
    doc: 'A record’s input does not fit the harness (the `chat` harness needs a list of messages with at least one `user` turn); the result is recorded as an error for that record.',
  },
  TARGET_TIMEOUT: {
    kind: 'deadline_exceeded',
    retryable: true,
    doc: 'A target call did not finish within the call timeout (`environment.timeout` or the target’s `timeout`); a command target’s process group was killed.',
  },
  TARGET_REQUEST_FAILED: {
    kind: 'unavailable',
    retryable: true,
    doc: 'An HTTP or OpenAI-compatible target answered with an error status (after the configured retries) or could not be reached.',
  },
  TARGET_BAD_RESPONSE: {
    kind: 'failed_precondition',
    doc: 'A target answered with something that is not what its kind expects (not JSON, not a chat completion, `outputPath` matching nothing, a `record` answer of the wrong shape).',
  },
  TARGET_OUTPUT_TOO_LARGE: {
    kind: 'resource_exhausted',
    doc: 'A target’s answer or a command’s stdout exceeded the output cap (4 MiB); the output was discarded.',
  },
  TARGET_COMMAND_NOT_FOUND: {
    kind: 'failed_precondition',
    doc: 'A command target’s program (argv[0]) does not exist or is not executable, or its working directory does not exist.',
  },
  TARGET_COMMAND_FAILED: {
    kind: 'failed_precondition',
    doc: 'A command target exited with a non-zero status or was killed by a signal; the message carries a short excerpt of its stderr.',
  },
});
