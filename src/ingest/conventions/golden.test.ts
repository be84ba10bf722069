import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { contentText, outputText, RecordSchema, type Step } from '../../core/index.js';
import { decodeOtlpJson, decodeOtlpLogsJson, decodeOtlpLogsProtobuf } from '../otlp/index.js';
import {
  FIXTURES_DIR,
  fixtureNames,
  fixtureSpans,
  fixtureTraces,
  GOLDEN_DIR,
  goldenOf,
  goldenPath,
  reduceTrace,
  withLogEvents,
} from './golden.testkit.js';
import { normalizeTrace } from './index.js';

/**
 * Golden tests over traces recorded from the real instrumentation libraries (DESIGN §4): every
 * fixture in test/fixtures/otlp/ must match its reviewed golden trajectory, and the key facts of
 * the scenario, read off the fixtures' JSON dumps by hand, are asserted on their own so a wrong
 * golden cannot hide a wrong normalizer. Regenerate goldens with
 * `npx tsx test/fixtures/otlp/golden/update.ts` and review the diff.
 */

const QUESTION = /What is the weather in Paris and what should I wear\?/;
const ANSWER_OK = /Wear a light jacket over a t-shirt, jeans and comfortable walking shoes\./;
const ANSWER_AFTER_FAILURE = /could not get clothing suggestions because the clothing tool failed/;
const TOOL_ERROR = /clothing catalogue unavailable \(HTTP 503\)/;

interface Facts {
  /** Input and output tokens summed over the provider's own counts on each model call. */
  tokens: [number, number];
  /** suggest_clothes raised. */
  toolError?: boolean;
  /** The model replied with an empty message after get_weather, and the agent failed the run. */
  emptyAnswer?: boolean;
  session?: string;
  labels?: Record<string, string>;
}

/** Read from test/fixtures/otlp/<name>.json (token attributes of the three model-call spans). */
const FACTS: Record<string, Facts> = {
  'mlflow-openai': { tokens: [782, 139] },
  'mlflow-openai-genai-semconv': { tokens: [782, 139] },
  'mlflow-openai-tool-error': { tokens: [781, 147], toolError: true },
  'openinference-langgraph': { tokens: [753, 139], session: 'conv-weather-1' },
  'openinference-langgraph-tool-error': {
    tokens: [759, 147],
    toolError: true,
    session: 'conv-weather-1',
  },
  'openinference-openai': { tokens: [782, 139], session: 'conv-weather-1' },
  'openinference-openai-genai-semconv': { tokens: [782, 139], session: 'conv-weather-1' },
  'openinference-openai-tool-error': {
    tokens: [781, 147],
    toolError: true,
    session: 'conv-weather-1',
  },
  // The v2 instrumentation without the latest-experimental opt-in (and with `event_only` in it)
  // sends content as log events, which fixtureSpans joins to their spans as /v1/logs does.
  'otel-genai-openai-v2-events': { tokens: [782, 139], session: 'conv-weather-1' },
  'otel-genai-openai-v2-events-empty-answer': {
    tokens: [438, 67],
    emptyAnswer: true,
    session: 'conv-weather-1',
  },
  'otel-genai-openai-v2-latest-event-only': { tokens: [782, 139], session: 'conv-weather-1' },
  'otel-genai-openai-v2-latest-labels': {
    tokens: [782, 139],
    session: 'conv-weather-1',
    labels: { workflow: 'weather', version: '2' },
  },
  'otel-genai-openai-v2-latest-tool-error': {
    tokens: [781, 147],
    toolError: true,
    session: 'conv-weather-1',
  },
  'vercel-ai-sdk': { tokens: [886, 90], session: 'conv-weather-1' },
  'vercel-ai-sdk-tool-error': { tokens: [883, 99], toolError: true, session: 'conv-weather-1' },
};

const names = fixtureNames();

describe('recorded fixtures', () => {
  it('are present (test/fixtures/otlp, see its README)', () => {
    expect(names.length).toBeGreaterThan(0);
  });

  it('each have a golden trajectory, and each golden has its fixture', () => {
    const goldens = existsSync(GOLDEN_DIR)
      ? readdirSync(GOLDEN_DIR)
          .filter((f) => f.endsWith('.trajectory.json'))
          .map((f) => f.slice(0, -'.trajectory.json'.length))
      : [];
    expect(goldens.sort()).toEqual(names);
    expect(Object.keys(FACTS).sort()).toEqual(names);
  });
});

describe.each(names)('fixture %s', (name) => {
  const traces = fixtureTraces(name);
  const facts = FACTS[name];

  it('matches its golden trajectory', () => {
    const golden = JSON.parse(readFileSync(goldenPath(name), 'utf8'));
    expect(goldenOf(name)).toEqual(golden);
  });

  it('reads the same from its OTLP/JSON dump as from its protobuf requests', () => {
    const options = { maxAttributeBytes: 64 * 1024 };
    const text = readFileSync(join(FIXTURES_DIR, `${name}.json`), 'utf8');
    const logs = join(FIXTURES_DIR, `${name}.logs.json`);
    const events = existsSync(logs)
      ? decodeOtlpLogsJson(readFileSync(logs, 'utf8'), options).events
      : [];
    const spans = withLogEvents(decodeOtlpJson(text, options).spans, events);
    const fromJson = reduceTrace(normalizeTrace(spans));
    expect(fromJson).toEqual(reduceTrace(normalizeTrace(fixtureSpans(name))));
  });

  it('reads the same trajectory, less the agent step, while the root span has not arrived', () => {
    const partial = reduceTrace(normalizeTrace(fixtureSpans(name).filter((s) => s.parentSpanId)));
    const complete = reduceTrace(traces[0]!);
    expect(partial.steps).toEqual(complete.steps?.filter((s) => s.type !== 'agent'));
    expect(partial.usage).toEqual(complete.usage);
    expect(contentText(partial.input)).toMatch(QUESTION);
    if (facts?.emptyAnswer) expect(partial.output).toBeUndefined();
    else {
      expect(outputText(partial.output)).toMatch(
        facts?.toolError ? ANSWER_AFTER_FAILURE : ANSWER_OK,
      );
    }
  });

  it('holds the key facts of the scenario', () => {
    expect(facts, `add the key facts of ${name} to FACTS`).toBeDefined();
    if (!facts) return;
    expect(traces).toHaveLength(1);
    const { record, summary } = traces[0]!;
    expect(RecordSchema.safeParse(record).success).toBe(true);
    const steps = record.trajectory ?? [];

    if (facts.emptyAnswer) {
      // Agent, model call, get_weather, then a model call whose reply was empty: the run failed.
      expect(steps.map((s) => s.type)).toEqual(['agent', 'llm', 'tool', 'llm']);
      expect(steps[0]?.error).toMatch(/EmptyAnswer: the model sent an empty message/);
      expect(summary.error).toBe(true);
      expect(steps[2]?.output).toEqual({ city: 'Paris', temperature_c: 18, condition: 'sunny' });
      expect(steps[3]?.output).toBeUndefined();
      expect(record.output).toBeUndefined();
    } else {
      // One agent run: agent, then model call / tool / model call / tool / model call.
      expect(steps.map((s) => s.type)).toEqual(['agent', 'llm', 'tool', 'llm', 'tool', 'llm']);
      expect(steps.filter((s) => s.type === 'tool').map((s) => s.name)).toEqual([
        'get_weather',
        'suggest_clothes',
      ]);
      expect(summary.steps).toBe(6);
      const [weather, clothes] = steps.filter((s) => s.type === 'tool') as [Step, Step];
      expect(JSON.parse(String(weather.input))).toEqual({ city: 'Paris' });
      expect(JSON.parse(String(clothes.input))).toEqual({ temperature_c: 18 });
      expect(weather.output).toEqual({ city: 'Paris', temperature_c: 18, condition: 'sunny' });
      expect(weather.error).toBe('');
      if (facts.toolError) {
        expect(clothes.error).toMatch(TOOL_ERROR);
        expect(summary.error).toBe(true);
      } else {
        expect(steps.every((s) => s.error === '')).toBe(true);
        expect(summary.error).toBe(false);
      }
      expect(outputText(record.output)).toMatch(facts.toolError ? ANSWER_AFTER_FAILURE : ANSWER_OK);
    }

    expect(record.usage).toMatchObject({
      inputTokens: facts.tokens[0],
      outputTokens: facts.tokens[1],
      totalTokens: facts.tokens[0] + facts.tokens[1],
    });
    expect(
      steps.filter((s) => s.type === 'llm').every((s) => s.model === 'gpt-4o-mini-2024-07-18'),
    ).toBe(true);

    expect(contentText(record.input)).toMatch(QUESTION);
    expect(record.labels).toEqual(facts.labels ?? {});
    expect(summary.labels).toEqual(facts.labels ?? {});
    expect(record.metadata?.sessionId).toBe(facts.session);
    expect(summary.service).toBe('weather-agent');
  });
});

describe('GenAI events sent as OTLP logs (otel-genai-openai-v2-events)', () => {
  const name = 'otel-genai-openai-v2-events';

  it('are 15 GenAI events on the three model calls, and nothing else', () => {
    const body = new Uint8Array(readFileSync(join(FIXTURES_DIR, `${name}.logs.1.pb`)));
    const decoded = decodeOtlpLogsProtobuf(body, { maxAttributeBytes: 64 * 1024 });
    expect(decoded).toMatchObject({ rejected: 0, ignored: 0 });
    expect(decoded.events).toHaveLength(15);
    const chats = fixtureSpans(name).filter((s) => s.name === 'chat gpt-4o-mini');
    expect(new Set(decoded.events.map((e) => e.spanId))).toEqual(
      new Set(chats.map((s) => s.spanId)),
    );
  });

  it('give the model calls their messages once joined to their spans', () => {
    const { record } = normalizeTrace(fixtureSpans(name));
    const llm = (record.trajectory ?? []).filter((s) => s.type === 'llm');
    expect(llm[0]?.input).toEqual([
      { role: 'system', content: 'You are a helpful travel assistant. Use the tools to answer.' },
      { role: 'user', content: 'What is the weather in Paris and what should I wear?' },
    ]);
    expect(llm[0]?.output).toEqual([
      {
        role: 'assistant',
        toolCalls: [
          { id: 'call_get_weather_1', name: 'get_weather', arguments: '{"city": "Paris"}' },
        ],
      },
    ]);
    expect(outputText(llm[2]?.output)).toMatch(ANSWER_OK);
    // The tool spans carry no content; arguments and results come from the model calls around them.
    const tools = (record.trajectory ?? []).filter((s) => s.type === 'tool');
    expect(tools.map((s) => [s.name, s.input])).toEqual([
      ['get_weather', '{"city": "Paris"}'],
      ['suggest_clothes', '{"temperature_c": 18}'],
    ]);
    expect(tools[0]?.output).toEqual({ city: 'Paris', temperature_c: 18, condition: 'sunny' });
    expect(contentText(record.input)).toMatch(QUESTION);
    expect(outputText(record.output)).toMatch(ANSWER_OK);
  });

  it('leave a model call without messages while its log records have not arrived', () => {
    const spans = fixtureSpans(name).map((s) => ({
      ...s,
      events: s.events.filter((e) => !e.name.startsWith('gen_ai.')),
    }));
    const { record } = normalizeTrace(spans);
    expect(record.input).toBeUndefined();
    expect(record.output).toBeUndefined();
  });
});
