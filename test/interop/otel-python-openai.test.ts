import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenAiStub, type StubRequest } from '../support/openai-stub.js';
import { createKey, eventually, launchServer, type RunningServer } from '../support/process.js';
import { runPython } from '../support/python.js';

/**
 * The official OpenTelemetry instrumentation of the OpenAI client
 * (`opentelemetry-instrumentation-openai-v2`, default conventions: chat messages as GenAI events
 * in OTLP log records) driving a real `touchstone serve`, with the real OTel Python SDK exporting
 * traces and logs over OTLP/HTTP in protobuf and in JSON, configured only through OTEL_* variables.
 * The model is the OpenAI-compatible stub, which answers with tool calls and names a served model
 * other than the one asked for. Needs TOUCHSTONE_INTEROP_PYTHON (the python of a venv with
 * test/interop/python/requirements.txt; .ci/run makes it); skipped without it, except under CI
 * where that is a failure.
 */
const PYTHON = process.env.TOUCHSTONE_INTEROP_PYTHON || undefined;
const SKIP_REASON =
  'TOUCHSTONE_INTEROP_PYTHON is not set (the python of a venv with test/interop/python/requirements.txt)';
const PROJECT = 'genai';
const QUESTION = 'What is the weather in Paris and what should I wear?';
const ANSWER = 'Wear a light jacket: it is 18°C and sunny in Paris.';
const REQUESTED = 'gpt-4o-mini';
const SERVED = 'gpt-4o-mini-2024-07-18';

interface Step {
  type: string;
  name: string;
  model?: string;
  input?: unknown;
  output?: unknown;
  error?: string;
}

interface TraceView {
  trace: { traceId: string; error: boolean; digest?: string };
  record: {
    input?: unknown;
    output?: unknown;
    trajectory: Step[];
    metadata: { models?: string[] };
  };
}

/**
 * The model's side of the scenario, from the conversation so far: `get_weather`, then (`ok`)
 * `suggest_clothes` and the answer, or (`fail`) an empty message — OpenAI's `content: null,
 * tool_calls: []` — after which the agent gives up.
 */
function model(mode: 'ok' | 'fail') {
  return (_last: string, _seen: number, request: StubRequest) => {
    const results = (request.body.messages ?? []).filter((m) => m.role === 'tool').length;
    const call = (id: string, name: string, args: unknown) => ({
      content: null,
      servedModel: SERVED,
      toolCalls: [{ id, name, arguments: JSON.stringify(args) }],
    });
    if (results === 0) return call('call_weather', 'get_weather', { city: 'Paris' });
    if (mode === 'fail') return { content: null, servedModel: SERVED, toolCalls: [] };
    if (results === 1) return call('call_clothes', 'suggest_clothes', { temperature_c: 18 });
    return { content: ANSWER, servedModel: SERVED };
  };
}

if (PYTHON === undefined && process.env.CI) {
  describe('opentelemetry-instrumentation-openai-v2 → touchstone serve', () => {
    it('has its venv under CI', () => {
      throw new Error(SKIP_REASON);
    });
  });
}

describe.skipIf(PYTHON === undefined)(
  'opentelemetry-instrumentation-openai-v2 → touchstone serve (traces and GenAI log events)',
  () => {
    if (PYTHON === undefined) console.log(`skipped: ${SKIP_REASON}`);
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-interop-genai-'));
    const stub = new OpenAiStub();
    let server: RunningServer;
    let stubUrl = '';
    const keys = { ingest: '', editor: '' };

    beforeAll(async () => {
      writeFileSync(join(dir, 'config.yaml'), 'auth: {}\ntraces:\n  completion_grace: 200ms\n');
      const data = join(dir, 'data');
      keys.ingest = createKey(data, PROJECT, 'ingest');
      keys.editor = createKey(data, PROJECT, 'editor');
      server = await launchServer(data, join(dir, 'config.yaml'));
      stubUrl = await stub.start();
      // Selected by the model names the trajectory gives: the served one, never the requested.
      for (const [name, wanted] of [
        ['served-model', SERVED],
        ['requested-model', REQUESTED],
      ]) {
        await api('POST', '/v1alpha1/policies', {
          apiVersion: 'touchstone.dev/v1alpha1',
          kind: 'OnlineEvalPolicy',
          metadata: { name },
          spec: {
            selector: `"${wanted}" in models`,
            stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
          },
        });
      }
    });
    afterAll(async () => {
      server?.server.proc.kill('SIGKILL');
      await stub.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    async function api(method: string, path: string, body?: unknown): Promise<unknown> {
      const res = await fetch(`${server.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${keys.editor}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
      return JSON.parse(text);
    }

    /** Runs the agent program; returns its trace id. */
    async function runAgent(
      mode: 'ok' | 'fail',
      encoding: 'protobuf' | 'json',
      flushFirst: 'traces' | 'logs',
    ): Promise<string> {
      stub.answer = model(mode);
      const out = await runPython(
        PYTHON as string,
        [join(process.cwd(), 'test', 'interop', 'python', 'openai_agent.py')],
        {
          env: {
            OPENAI_BASE_URL: stubUrl,
            OPENAI_API_KEY: 'sk-interop-dummy',
            OTEL_EXPORTER_OTLP_ENDPOINT: server.base,
            OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${keys.ingest}`,
            OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
            OTEL_SERVICE_NAME: 'weather-agent',
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
            TOUCHSTONE_OTLP_ENCODING: encoding,
            TOUCHSTONE_FLUSH_FIRST: flushFirst,
          },
          timeoutMs: 120_000,
        },
      );
      const traceId = out.trim().split('\n').at(-1) ?? '';
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      return traceId;
    }

    /** The trace once completed with the messages of its log events (the question is there). */
    function completedWithMessages(traceId: string): Promise<TraceView> {
      return eventually(async () => {
        const res = await fetch(`${server.base}/v1alpha1/traces/${traceId}`, {
          headers: { authorization: `Bearer ${keys.editor}` },
        });
        if (res.status !== 200) return undefined;
        const view = (await res.json()) as TraceView;
        return view.record.input === QUESTION ? view : undefined;
      }, 30_000);
    }

    for (const [encoding, flushFirst] of [
      ['protobuf', 'traces'],
      ['json', 'logs'],
    ] as const) {
      it(`gives the Record the user input and the model output of the log events (${encoding}, ${flushFirst} flushed first)`, async () => {
        const traceId = await runAgent('ok', encoding, flushFirst);
        const { trace, record } = await completedWithMessages(traceId);
        expect(trace.error).toBe(false);
        expect(record.output).toBe(ANSWER);
        const llm = record.trajectory.filter((s) => s.type === 'llm');
        expect(llm).toHaveLength(3);
        expect(llm[0]?.input).toEqual([
          { role: 'system', content: 'You are a travel assistant. Use the tools.' },
          { role: 'user', content: QUESTION },
        ]);
        expect(llm[0]?.output).toEqual([
          {
            role: 'assistant',
            toolCalls: [{ id: 'call_weather', name: 'get_weather', arguments: '{"city":"Paris"}' }],
          },
        ]);
        expect(llm[2]?.output).toEqual([{ role: 'assistant', content: ANSWER }]);
        // The served model names the model calls, in the trajectory and for policy selectors.
        expect(llm.map((s) => s.model)).toEqual([SERVED, SERVED, SERVED]);
        expect(record.metadata.models).toEqual([SERVED]);
        const tools = record.trajectory.filter((s) => s.type === 'tool');
        expect(tools.map((s) => [s.name, s.input])).toEqual([
          ['get_weather', '{"city":"Paris"}'],
          ['suggest_clothes', '{"temperature_c":18}'],
        ]);
        const scores = await eventually(async () => {
          const view = (await api('GET', `/v1alpha1/traces/${traceId}/scores`)) as {
            results: Record<string, unknown[]>;
          };
          return Object.keys(view.results).length > 0 ? view.results : undefined;
        }, 30_000);
        expect(Object.keys(scores)).toEqual(['served-model']);
      });
    }

    it('gives a run that failed on an empty model reply after a tool call no output', async () => {
      const traceId = await runAgent('fail', 'protobuf', 'logs');
      const { trace, record } = await completedWithMessages(traceId);
      expect(trace.error).toBe(true);
      expect(record.output).toBeUndefined();
      const llm = record.trajectory.filter((s) => s.type === 'llm');
      expect(llm).toHaveLength(2);
      expect(llm[0]?.output).toEqual([
        {
          role: 'assistant',
          toolCalls: [{ id: 'call_weather', name: 'get_weather', arguments: '{"city":"Paris"}' }],
        },
      ]);
      // The empty reply is no message at all.
      expect(llm[1]?.output).toBeUndefined();
      expect(record.trajectory.filter((s) => s.type === 'tool').map((s) => s.name)).toEqual([
        'get_weather',
      ]);
    });
  },
);
