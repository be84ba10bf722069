import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { JudgeConfig } from '../../config/index.js';
import {
  type BackoffPolicy,
  backoffMs,
  type Clock,
  isTouchstoneError,
  Semaphore,
  systemClock,
  type TouchstoneError,
  withoutTrailingSlashes,
} from '../../core/index.js';
import {
  type HttpClient,
  type HttpResponse,
  isRetryableStatus,
  NetErrors,
  resolveCredential,
} from '../../net/index.js';
import type { Judge, JudgeRequest, JudgeResponse } from '../contract.js';
import { ChatUsageSchema, chatUsage, parseChatCompletion } from './chat-completion.js';
import { JudgeErrors } from './error-codes.js';
import { parseJsonObject } from './json-answer.js';
import { realSleep, type Sleep, TokenBucket } from './limits.js';
import { LruCache } from './lru-cache.js';

export interface JudgeDeps {
  http: HttpClient;
  /** The process environment as `main.ts` hands it in; credentials are looked up per call. */
  env: Readonly<Record<string, string | undefined>>;
  clock?: Clock;
  /** Injectable for tests on a fake clock; must reject with `signal.reason` on abort. */
  sleep?: Sleep;
  /** Jitter source in [0, 1). */
  random?: () => number;
  /** Cached answers kept per judge. Default 10 000; 0 disables the cache. */
  cacheEntries?: number;
  /** First backoff step; doubles per retry. Default 500 ms. */
  retryBaseDelayMs?: number;
  /** Longest wait between attempts, including a server's `Retry-After`. Default 60 s. */
  maxRetryDelayMs?: number;
}

/** Judge answers are short; a bigger body means a wrong endpoint, not a verdict. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
const MAX_BACKOFF_MS = 30_000;

const ChatCompletionSchema = z.object({
  model: z.string().optional(),
  choices: z.array(z.object({ message: z.object({ content: z.string() }) })).min(1),
  usage: ChatUsageSchema,
});

type Answer = Omit<JudgeResponse, 'cached'>;

/** Stable key over everything that changes an answer; field order fixed by construction. */
function cacheKey(model: string, request: JudgeRequest): string {
  const material = JSON.stringify([
    model,
    request.promptVersion,
    request.temperature ?? 0,
    request.maxTokens ?? null,
    request.json === true,
    request.messages.map((m) => [m.role, m.content]),
  ]);
  return createHash('sha256').update(material).digest('hex');
}

/**
 * An OpenAI-compatible judge (`POST {endpoint}/chat/completions`) with a concurrency limit, a
 * token-bucket rate limit, retries with backoff that honour `Retry-After`, and an LRU answer cache.
 */
export function createJudge(name: string, config: JudgeConfig, deps: JudgeDeps): Judge {
  const clock = deps.clock ?? systemClock;
  const sleep = deps.sleep ?? realSleep;
  const random = deps.random ?? Math.random;
  // "Equal jitter": never less than half the step, so retries still spread out under load.
  const backoff: BackoffPolicy = {
    baseMs: deps.retryBaseDelayMs ?? 500,
    maxMs: MAX_BACKOFF_MS,
    jitter: 'equal',
  };
  const maxDelayMs = deps.maxRetryDelayMs ?? 60_000;
  const url = `${withoutTrailingSlashes(config.endpoint)}/chat/completions`;
  const cache = new LruCache<Answer>(deps.cacheEntries ?? 10_000);
  const slots = new Semaphore(config.max_concurrency);
  const bucket = new TokenBucket(
    config.requests_per_second,
    Math.max(1, config.requests_per_second),
    clock,
    sleep,
  );
  const label = `judge "${name}"`;

  function headers(): Record<string, string> {
    const out: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
    };
    if (config.credential !== undefined) {
      const secret = resolveCredential(config.credential, deps.env);
      if (secret === undefined) {
        throw JudgeErrors.JUDGE_CREDENTIAL_MISSING(
          `${label}: environment variable ${config.credential.env} is not set`,
        );
      }
      out.authorization = `Bearer ${secret}`;
    }
    return out;
  }

  function body(request: JudgeRequest): string {
    const payload: Record<string, unknown> = {
      model: config.model,
      messages: request.messages,
      temperature: request.temperature ?? 0,
    };
    if (request.maxTokens !== undefined) payload.max_tokens = request.maxTokens;
    if (request.json === true) payload.response_format = { type: 'json_object' };
    return JSON.stringify(payload);
  }

  function parseAnswer(res: HttpResponse, request: JudgeRequest): Answer {
    const answer = parseChatCompletion(
      res.body,
      ChatCompletionSchema,
      label,
      JudgeErrors.JUDGE_BAD_RESPONSE,
    );
    const content = answer.choices[0]?.message.content ?? '';
    // Checked here, not only by the evaluator, so a malformed answer is never cached.
    if (request.json === true && parseJsonObject(content) === undefined) {
      throw JudgeErrors.JUDGE_BAD_RESPONSE(
        `${label} was asked for a JSON object and answered with something else`,
      );
    }
    return { content, model: answer.model ?? config.model, usage: chatUsage(answer.usage) };
  }

  function exhausted(last: TouchstoneError | HttpResponse, attempts: number): TouchstoneError {
    const tries = `${attempts} attempt${attempts === 1 ? '' : 's'}`;
    if ('status' in last) {
      const options =
        last.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: last.retryAfterSeconds };
      if (last.status === 429) {
        return JudgeErrors.JUDGE_RATE_LIMITED(
          `${label} is rate limited (HTTP 429 after ${tries})`,
          options,
        );
      }
      return JudgeErrors.JUDGE_UNAVAILABLE(
        `${label} failed with HTTP ${last.status} after ${tries}`,
        options,
      );
    }
    if (last.code === NetErrors.OUTBOUND_TIMEOUT.code) {
      return JudgeErrors.JUDGE_TIMEOUT(
        `${label} did not answer in ${config.timeout} ms (${tries})`,
        {
          cause: last,
        },
      );
    }
    return JudgeErrors.JUDGE_UNAVAILABLE(
      `${label} is unreachable after ${tries}: ${last.message}`,
      {
        cause: last,
      },
    );
  }

  async function send(
    request: JudgeRequest,
    requestHeaders: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<Answer> {
    const payload = body(request);
    const maxAttempts = config.max_retries + 1;
    for (let attempt = 1; ; attempt++) {
      await bucket.take(signal);
      let outcome: TouchstoneError | HttpResponse;
      try {
        outcome = await deps.http.request({
          method: 'POST',
          url,
          headers: requestHeaders,
          body: payload,
          timeoutMs: config.timeout,
          maxResponseBytes: MAX_ANSWER_BYTES,
          ...(signal === undefined ? {} : { signal }),
        });
      } catch (err) {
        if (signal?.aborted || !isTouchstoneError(err)) throw err;
        if (err.code === NetErrors.OUTBOUND_RESPONSE_TOO_LARGE.code) {
          throw JudgeErrors.JUDGE_BAD_RESPONSE(`${label} answered with an oversized body`, {
            cause: err,
          });
        }
        if (!err.retryable) throw err;
        outcome = err;
      }
      if ('status' in outcome) {
        if (outcome.status >= 200 && outcome.status < 300) return parseAnswer(outcome, request);
        if (!isRetryableStatus(outcome.status)) {
          const hint =
            outcome.status === 401 || outcome.status === 403 ? '; check its credential' : '';
          const what =
            outcome.status >= 300 && outcome.status < 400
              ? 'redirected (not followed)'
              : 'refused the request';
          throw JudgeErrors.JUDGE_REQUEST_REFUSED(
            `${label} ${what} with HTTP ${outcome.status}${hint}`,
          );
        }
      }
      if (attempt >= maxAttempts) throw exhausted(outcome, attempt);
      const retryAfter = outcome.retryAfterSeconds;
      let delay = backoffMs(attempt, backoff, undefined, random);
      if (retryAfter !== undefined) {
        const asked = retryAfter * 1000;
        // A wait longer than we are allowed to hold a slot is reported, not slept through.
        if (asked > maxDelayMs) throw exhausted(outcome, attempt);
        delay = asked + random() * Math.min(1000, asked * 0.1);
      }
      await sleep(Math.min(delay, maxDelayMs), signal);
    }
  }

  return {
    name,
    model: config.model,
    async complete(request: JudgeRequest, signal?: AbortSignal): Promise<JudgeResponse> {
      signal?.throwIfAborted();
      const cacheable = (request.temperature ?? 0) === 0;
      const key = cacheKey(config.model, request);
      const hit = cacheable ? cache.get(key) : undefined;
      if (hit !== undefined) {
        request.validate?.(hit.content);
        return { ...hit, usage: { ...hit.usage }, cached: true };
      }
      // Resolved per call so a rotated secret is used without a restart.
      const requestHeaders = headers();
      const release = await slots.acquire(signal);
      try {
        const answer = await send(request, requestHeaders, signal);
        request.validate?.(answer.content);
        if (cacheable) cache.set(key, answer);
        return { ...answer, usage: { ...answer.usage }, cached: false };
      } finally {
        release();
      }
    },
  };
}

/** One judge per configured name, as the composition root wires them from `config.judges`. */
export function createJudges(
  configs: Readonly<Record<string, JudgeConfig>>,
  deps: JudgeDeps,
): Map<string, Judge> {
  const judges = new Map<string, Judge>();
  for (const [name, config] of Object.entries(configs))
    judges.set(name, createJudge(name, config, deps));
  return judges;
}
