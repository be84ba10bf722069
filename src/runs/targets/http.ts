import { CredentialErrors, resolveCredential } from '../../net/index.js';
import type { TargetCall, TargetDeps, TargetOutput } from './contract.js';
import { TargetErrors } from './error-codes.js';
import type { Backend, ChatMessage } from './harness.js';
import { formatJsonPath, parseJsonPath, readJsonPath } from './json-path.js';
import { sendWithRetries, targetHttpClient } from './outbound.js';
import type { HttpTargetSpec } from './schema.js';
import { renderTemplate } from './template.js';

/**
 * An agent behind an HTTP endpoint. The body is `bodyTemplate` filled in (see template.ts); the
 * answer must be 2xx. With `outputPath` `$` a JSON answer is the output as parsed and any other
 * answer its text; any other path needs a JSON answer and names the value taken from it.
 */
export function httpBackend(
  spec: HttpTargetSpec,
  deps: TargetDeps,
  maxBytes: number,
  now: () => number,
): Backend {
  const url = new URL(spec.url);
  const http = targetHttpClient(url, deps, maxBytes);
  const label = `http target ${url.host}`;
  const path = parseJsonPath(spec.outputPath);
  if (typeof path === 'string') {
    throw TargetErrors.TARGET_INVALID(`target.outputPath ${path}`, {
      details: [{ path: 'target.outputPath', message: path }],
    });
  }
  const baseDelayMs = deps.retryBaseDelayMs ?? 500;
  const hasContentType = Object.keys(spec.headers).some((n) => n.toLowerCase() === 'content-type');

  function headers(): Record<string, string> {
    const out: Record<string, string> = { accept: 'application/json, text/plain;q=0.9, */*;q=0.5' };
    if (!hasContentType) out['content-type'] = 'application/json';
    for (const [name, value] of Object.entries(spec.headers)) {
      if (typeof value === 'string') {
        out[name.toLowerCase()] = value;
        continue;
      }
      const secret = resolveCredential({ env: value.env }, deps.env);
      if (secret === undefined) {
        throw CredentialErrors.CREDENTIAL_UNREADABLE(
          `${label}: header ${name} names the variable ${value.env}, which is unset or blank`,
        );
      }
      out[name.toLowerCase()] = `${value.prefix ?? ''}${secret}`;
    }
    return out;
  }

  async function send(input: unknown, call: TargetCall, signal: AbortSignal) {
    const body = renderTemplate(spec.bodyTemplate, {
      input,
      recordId: call.record.id,
      trial: call.trial,
    });
    const start = now();
    const res = await sendWithRetries(
      http,
      { method: spec.method, url, headers: headers(), body },
      spec.retries,
      baseDelayMs,
      label,
      signal,
    );
    const latencyMs = now() - start;
    const text = res.body.toString('utf8');
    let json: unknown;
    let isJson = true;
    try {
      json = JSON.parse(text);
    } catch {
      isJson = false;
    }
    const segments = path as Exclude<typeof path, string>;
    if (!isJson) {
      if (segments.length === 0) return { output: text as unknown, latencyMs };
      throw TargetErrors.TARGET_BAD_RESPONSE(
        `${label} answered with a body that is not JSON, so outputPath ${spec.outputPath} cannot be read`,
      );
    }
    const found = readJsonPath(json, segments);
    if (!found.found) {
      throw TargetErrors.TARGET_BAD_RESPONSE(
        `${label}: outputPath ${spec.outputPath} matched nothing in the answer (missing from ${formatJsonPath(segments, found.at + 1)})`,
      );
    }
    return { output: found.value, latencyMs };
  }

  return {
    kind: 'http',
    concurrency: spec.concurrency ?? 8,
    label,
    async single(call, signal): Promise<TargetOutput> {
      const { output, latencyMs } = await send(call.record.input, call, signal);
      return { output, usage: { latencyMs } };
    },
    async turn(conversation: readonly ChatMessage[], call, signal) {
      const { output, latencyMs } = await send(conversation, call, signal);
      return { reply: output, usage: { latencyMs } };
    },
    close: () => http.close(),
  };
}
