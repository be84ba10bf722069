import { type ChildProcess, spawn } from 'node:child_process';
import { z } from 'zod';
import { StepSchema, UsageSchema } from '../../core/index.js';
import type { TargetCall, TargetOutput } from './contract.js';
import { TargetErrors } from './error-codes.js';
import type { Backend, ChatMessage, TurnResult } from './harness.js';
import type { CommandTargetSpec } from './schema.js';

/** What a `stdout: record` command prints. */
const RecordAnswerSchema = z.strictObject({
  output: z.unknown(),
  trajectory: z.array(StepSchema).optional(),
  usage: UsageSchema.optional(),
});

const STDERR_TAIL_BYTES = 4096;
const EXCERPT_CHARS = 200;
const ERROR_LINE = /error|exception|fatal|panic|denied|not found|no such|cannot|failed/i;

export interface CommandOptions {
  /** The process environment: PATH plus the granted variables, nothing else. */
  env: Record<string, string>;
  cwd: string | undefined;
  maxBytes: number;
  /** Values never shown in an excerpt (the granted variables' values). */
  secrets: readonly string[];
}

/** Input text on stdin: strings as they are, anything else as JSON. */
function stdinText(value: unknown): string {
  if (typeof value === 'string') return value;
  return value === undefined ? '' : JSON.stringify(value);
}

/**
 * The last stderr line that names an error (else the last non-empty line), control characters
 * removed, granted values masked, cut to 200 characters: enough to say why a command failed without relaying what it printed.
 */
export function stderrExcerpt(tail: Buffer, secrets: readonly string[]): string {
  let text = tail.toString('utf8');
  for (const secret of secrets) {
    if (secret.length >= 4) text = text.split(secret).join('***');
  }
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.replace(/[\p{Cc}\p{Cf}]/gu, ' ').trim())
    .filter((l) => l !== '');
  // Runtimes end a crash with a banner (`Node.js v20…`); the line naming the error says more.
  const last = lines.findLast((l) => ERROR_LINE.test(l)) ?? lines.at(-1) ?? '';
  return last.length > EXCERPT_CHARS ? `${last.slice(0, EXCERPT_CHARS)}…` : last;
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    // The negative pid is the process group the child leads (spawned detached).
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/**
 * A local program: argv run without a shell in its own process group, the input on stdin, the
 * output read from stdout (bounded). When the program exits, or the call's deadline passes or it
 * is aborted, the whole group is killed, so nothing it started outlives the call.
 */
export function commandBackend(
  spec: CommandTargetSpec,
  options: CommandOptions,
  now: () => number,
): Backend {
  const program = spec.argv[0] as string;
  const label = `command target ${JSON.stringify(program)}`;
  const running = new Set<ChildProcess>();

  function run(stdin: string, call: TargetCall, signal: AbortSignal): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      signal.throwIfAborted();
      const env: Record<string, string> = {
        ...options.env,
        TOUCHSTONE_RECORD_ID: call.record.id ?? '',
        TOUCHSTONE_TRIAL: String(call.trial),
      };
      let child: ChildProcess;
      try {
        child = spawn(program, spec.argv.slice(1), {
          cwd: options.cwd,
          env,
          stdio: ['pipe', 'pipe', 'pipe'],
          detached: true,
          shell: false,
          windowsHide: true,
        });
      } catch (err) {
        reject(
          TargetErrors.TARGET_COMMAND_NOT_FOUND(`${label} could not be started`, { cause: err }),
        );
        return;
      }
      running.add(child);
      const out: Buffer[] = [];
      let outBytes = 0;
      let errTail = Buffer.alloc(0);
      let failure: unknown;
      let settled = false;

      const fail = (err: unknown) => {
        failure ??= err;
        killGroup(child);
      };
      const onAbort = () => fail(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });

      child.stdout?.on('data', (chunk: Buffer) => {
        outBytes += chunk.length;
        if (outBytes > options.maxBytes) {
          fail(
            TargetErrors.TARGET_OUTPUT_TOO_LARGE(
              `${label} wrote more than ${options.maxBytes} bytes to stdout`,
            ),
          );
          return;
        }
        out.push(chunk);
      });
      child.stderr?.on('data', (chunk: Buffer) => {
        errTail = Buffer.concat([errTail, chunk]);
        if (errTail.length > STDERR_TAIL_BYTES) errTail = errTail.subarray(-STDERR_TAIL_BYTES);
      });
      // A program that exits without reading its input closes the pipe; that is not a failure.
      child.stdin?.on('error', () => {});
      child.stdin?.end(stdin);

      child.on('error', (err: NodeJS.ErrnoException) => {
        const why =
          err.code === 'ENOENT'
            ? 'was not found (check argv[0] and PATH)'
            : err.code === 'EACCES'
              ? 'is not executable'
              : `could not be started (${err.code ?? 'error'})`;
        fail(TargetErrors.TARGET_COMMAND_NOT_FOUND(`${label} ${why}`));
      });
      // Stragglers left by the program (a background child holding stdout) go with it.
      child.on('exit', () => killGroup(child));
      child.on('close', (code, sig) => {
        if (settled) return;
        settled = true;
        running.delete(child);
        signal.removeEventListener('abort', onAbort);
        if (failure !== undefined) {
          reject(failure);
          return;
        }
        if (code !== 0) {
          const excerpt = stderrExcerpt(errTail, options.secrets);
          const how =
            code === null ? `was killed by ${sig ?? 'a signal'}` : `exited with status ${code}`;
          reject(
            TargetErrors.TARGET_COMMAND_FAILED(
              `${label} ${how}${excerpt === '' ? '' : ` (stderr: ${excerpt})`}`,
            ),
          );
          return;
        }
        resolve(Buffer.concat(out, Math.min(outBytes, options.maxBytes)));
      });
    });
  }

  function parseStdout(raw: Buffer): TurnResult {
    const text = raw.toString('utf8');
    if (spec.stdout === 'text') return { reply: text.replace(/\r?\n$/, '') };
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw TargetErrors.TARGET_BAD_RESPONSE(
        `${label} was read as ${spec.stdout} but its stdout is not JSON`,
      );
    }
    if (spec.stdout === 'json') return { reply: json };
    const parsed = RecordAnswerSchema.safeParse(json);
    if (!parsed.success || !Object.hasOwn(json as object, 'output')) {
      const fields = parsed.success
        ? 'output'
        : [...new Set(parsed.error.issues.map((i) => i.path.join('.') || '(root)'))]
            .slice(0, 5)
            .join(', ');
      throw TargetErrors.TARGET_BAD_RESPONSE(
        `${label} was read as a record ({output, trajectory?, usage?}) but its stdout does not fit (wrong or missing: ${fields})`,
      );
    }
    return {
      reply: parsed.data.output,
      ...(parsed.data.trajectory === undefined ? {} : { steps: parsed.data.trajectory }),
      ...(parsed.data.usage === undefined ? {} : { usage: parsed.data.usage }),
    };
  }

  /** The program's answer; its latency unless it reported its own usage. */
  async function timed(stdin: string, call: TargetCall, signal: AbortSignal): Promise<TurnResult> {
    const start = now();
    const answer = parseStdout(await run(stdin, call, signal));
    return answer.usage === undefined ? { ...answer, usage: { latencyMs: now() - start } } : answer;
  }

  return {
    kind: 'command',
    concurrency: spec.concurrency ?? 2,
    label,
    async single(call, signal): Promise<TargetOutput> {
      const answer = await timed(stdinText(call.record.input), call, signal);
      return {
        output: answer.reply,
        ...(answer.steps === undefined ? {} : { trajectory: answer.steps }),
        ...(answer.usage === undefined ? {} : { usage: answer.usage }),
      };
    },
    turn: (conversation: readonly ChatMessage[], call, signal) =>
      timed(JSON.stringify(conversation), call, signal),
    async close() {
      for (const child of running) killGroup(child);
    },
  };
}
