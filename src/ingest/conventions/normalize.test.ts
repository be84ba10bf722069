import { describe, expect, it } from 'vitest';
import { type AttributeValue, RecordSchema, type Span } from '../../core/index.js';
import { normalizeTrace } from './index.js';
import { json, ns, sid, span, stable, TRACE_ID } from './spans.testkit.js';

const chat = (extra: Record<string, AttributeValue> = {}) => ({
  'gen_ai.operation.name': 'chat',
  'gen_ai.request.model': 'gpt-4o',
  ...extra,
});

function valid(spans: Span[]) {
  const out = normalizeTrace(spans);
  const parsed = RecordSchema.safeParse(out.record);
  expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
  expect(() => JSON.stringify(out)).not.toThrow();
  return out;
}

describe('normalizeTrace: which spans are steps', () => {
  it('leaves plain spans (HTTP client, a plain root) out of the trajectory', () => {
    const { record, summary } = valid([
      span('POST /chat', { kind: 2, start: 0, end: 100, attrs: { 'http.request.method': 'POST' } }),
      span('chat gpt-4o', { parent: 'POST /chat', kind: 3, start: 10, end: 90, attrs: chat() }),
      span('POST', {
        parent: 'chat gpt-4o',
        kind: 3,
        start: 11,
        end: 89,
        attrs: { 'http.request.method': 'POST', 'url.full': 'https://api.openai.com/v1/chat' },
      }),
    ]);
    expect(record.trajectory?.map((s) => [s.type, s.name])).toEqual([['llm', 'chat gpt-4o']]);
    expect(record.trajectory?.[0]?.parentSpanId).toBeUndefined();
    expect(summary).toMatchObject({ name: 'POST /chat', steps: 1, durationMs: 100 });
    expect(record.usage?.latencyMs).toBe(100);
  });

  it('shows a failed container as a generic step only when no step shows the failure', () => {
    const { record } = valid([
      span('root', { start: 0, end: 100, attrs: { 'openinference.span.kind': 'AGENT' } }),
      span('RunnableSequence', {
        parent: 'root',
        start: 1,
        end: 50,
        attrs: { 'openinference.span.kind': 'CHAIN' },
        status: { code: 2, message: 'parser failed' },
      }),
      span('tools', {
        parent: 'root',
        start: 60,
        end: 90,
        attrs: { 'openinference.span.kind': 'CHAIN' },
        status: { code: 2, message: 'boom' },
      }),
      span('lookup', {
        parent: 'tools',
        start: 61,
        end: 89,
        attrs: { 'openinference.span.kind': 'TOOL', 'tool.name': 'lookup' },
        status: { code: 2, message: 'boom' },
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'root' },
      { type: 'generic', name: 'RunnableSequence', error: 'parser failed' },
      { type: 'tool', name: 'lookup', error: 'boom' },
    ]);
  });

  it('does not show a failed HTTP retry inside a model call', () => {
    const { record, summary } = valid([
      span('chat', { start: 0, end: 100, attrs: chat() }),
      span('POST', { parent: 'chat', start: 1, end: 10, status: { code: 2, message: '429' } }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'llm', name: 'chat', model: 'gpt-4o' },
    ]);
    expect(summary.error).toBe(true);
  });

  it('keeps an evaluator span as a generic step without its children or their usage', () => {
    const { record } = valid([
      span('agent', { start: 0, end: 100, attrs: { 'openinference.span.kind': 'AGENT' } }),
      span('chat', {
        parent: 'agent',
        start: 1,
        end: 10,
        attrs: chat({ 'gen_ai.usage.input_tokens': 5, 'gen_ai.usage.output_tokens': 1 }),
      }),
      span('relevance', {
        parent: 'agent',
        start: 20,
        end: 30,
        attrs: { 'openinference.span.kind': 'EVALUATOR' },
      }),
      span('judge', {
        parent: 'relevance',
        start: 21,
        end: 29,
        attrs: chat({ 'gen_ai.usage.input_tokens': 500, 'gen_ai.usage.output_tokens': 100 }),
      }),
    ]);
    expect(record.trajectory?.map((s) => [s.type, s.name])).toEqual([
      ['agent', 'agent'],
      ['llm', 'chat'],
      ['generic', 'relevance'],
    ]);
    expect(record.usage).toMatchObject({ inputTokens: 5, outputTokens: 1, totalTokens: 6 });
  });

  it('merges nested tool spans of one call (framework tool span + MCP client span)', () => {
    const { record } = valid([
      span('agent', { start: 0, end: 100, attrs: { 'gen_ai.operation.name': 'invoke_agent' } }),
      span('execute_tool get_weather', {
        parent: 'agent',
        start: 10,
        end: 50,
        attrs: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'get_weather',
          'gen_ai.tool.call.arguments': '{"city":"Paris"}',
        },
      }),
      span('tools/call get_weather', {
        parent: 'execute_tool get_weather',
        kind: 3,
        start: 11,
        end: 49,
        attrs: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'get_weather',
          'gen_ai.tool.call.id': 'call_w1',
          'mcp.method.name': 'tools/call',
          'gen_ai.tool.call.result': '{"temp_c":18}',
        },
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'agent' },
      { type: 'tool', name: 'get_weather', input: '{"city":"Paris"}', output: { temp_c: 18 } },
    ]);
  });
});

describe('normalizeTrace: order, links, partial traces', () => {
  it('shows what spans lost to dropped counts on their steps and summed in the metadata', () => {
    const root = span('POST /chat', { kind: 2, start: 0, end: 100 });
    const llm = span('chat gpt-4o', { parent: 'POST /chat', start: 10, end: 90, attrs: chat() });
    const { record } = valid([
      { ...root, droppedAttributesCount: 4, droppedLinksCount: 1 },
      {
        ...llm,
        droppedAttributesCount: 2,
        droppedEventsCount: 3,
        events: [{ name: 'e', timeUnixNano: ns(20), attributes: {}, droppedAttributesCount: 5 }],
      },
    ]);
    expect(record.trajectory?.[0]?.dropped).toEqual({
      attributes: 2,
      events: 3,
      eventAttributes: 5,
    });
    expect(record.metadata?.dropped).toEqual({
      attributes: 6,
      events: 3,
      links: 1,
      eventAttributes: 5,
    });
    const clean = valid([root, llm]).record;
    expect(clean.trajectory?.[0]).not.toHaveProperty('dropped');
    expect(clean.metadata).not.toHaveProperty('dropped');
  });

  it('orders by start time (parallel calls in start order), ancestors first on a tie', () => {
    const tool = (name: string, start: number, end: number) =>
      span(name, {
        parent: 'agent',
        start,
        end,
        attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name },
      });
    const spans = [
      tool('c', 30, 40),
      tool('b', 20, 60),
      tool('a', 20, 50),
      span('agent', { start: 0, end: 100, attrs: { 'gen_ai.operation.name': 'invoke_agent' } }),
      span('inner', {
        id: 'inner',
        parent: 'agent',
        start: 0,
        end: 10,
        attrs: chat(),
      }),
    ];
    const names = (list: Span[]) => valid(list).record.trajectory?.map((s) => s.name);
    expect(names(spans)).toEqual(['agent', 'inner', 'a', 'b', 'c']);
    expect(names([...spans].reverse())).toEqual(['agent', 'inner', 'a', 'b', 'c']);
  });

  it('fills tool arguments, id and result from the model calls around a content-less tool span', () => {
    const { record } = valid([
      span('agent', { start: 0, end: 100, attrs: { 'gen_ai.operation.name': 'invoke_agent' } }),
      span('chat1', {
        parent: 'agent',
        start: 1,
        end: 10,
        attrs: chat({
          'gen_ai.output.messages': json([
            {
              role: 'assistant',
              parts: [{ type: 'tool_call', id: 'call_1', name: 'lookup', arguments: '{"q":"x"' }],
            },
          ]),
        }),
      }),
      span('execute_tool lookup', {
        parent: 'agent',
        start: 11,
        end: 20,
        attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup' },
      }),
      span('chat2', {
        parent: 'agent',
        start: 21,
        end: 30,
        attrs: chat({
          'gen_ai.input.messages': json([
            {
              role: 'tool',
              parts: [{ type: 'tool_call_response', id: 'call_1', result: 'found' }],
            },
          ]),
        }),
      }),
    ]);
    // Malformed arguments stay exactly as the model wrote them.
    expect(record.trajectory?.[2]).toMatchObject({
      name: 'lookup',
      input: '{"q":"x"',
      output: 'found',
    });
  });

  it('recovers a missing tool name by matching arguments (MLflow GenAI export)', () => {
    const { record } = valid([
      span('chat', {
        start: 0,
        end: 10,
        attrs: chat({
          'gen_ai.output.messages': json([
            {
              role: 'assistant',
              parts: [
                { type: 'tool_call', id: 'a', name: 'get_time', arguments: { tz: 'UTC' } },
                { type: 'tool_call', id: 'b', name: 'get_weather', arguments: { city: 'Paris' } },
              ],
            },
          ]),
        }),
      }),
      span('execute_tool', {
        start: 11,
        end: 20,
        attrs: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.call.arguments': '{"city": "Paris"}',
        },
      }),
    ]);
    expect(record.trajectory?.[1]).toMatchObject({ type: 'tool', name: 'get_weather' });
  });

  it('normalizes a trace still in progress (root not yet arrived)', () => {
    const missingRoot = 'root-not-yet-exported';
    const { record, summary } = valid([
      span('chat', {
        id: 'c1',
        parent: missingRoot,
        start: 10,
        end: 20,
        attrs: chat({
          'gen_ai.input.messages': json([
            { role: 'user', parts: [{ type: 'text', content: 'hi' }] },
          ]),
          'gen_ai.output.messages': json([
            { role: 'assistant', parts: [{ type: 'text', content: 'a' }] },
          ]),
        }),
      }),
      span('chat', {
        id: 'c2',
        parent: missingRoot,
        start: 30,
        end: 45,
        attrs: chat({
          'gen_ai.output.messages': json([
            { role: 'assistant', parts: [{ type: 'text', content: 'b' }] },
          ]),
        }),
      }),
    ]);
    // The first model call's question and the last one's answer.
    expect(record.input).toBe('hi');
    expect(record.output).toBe('b');
    expect(record.usage?.latencyMs).toBe(35);
    expect(record.trajectory?.every((s) => s.parentSpanId === sid(missingRoot))).toBe(true);
    expect(summary).toMatchObject({ name: 'chat', durationMs: 35, steps: 2 });
  });
});

describe('normalizeTrace: errors', () => {
  const tool = (status: Span['status'], events: Span['events'] = []) => {
    const s = span('lookup', {
      start: 0,
      end: 10,
      attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup' },
    });
    return { ...s, status, events };
  };
  const exception = {
    name: 'exception',
    timeUnixNano: ns(5),
    attributes: { 'exception.type': 'ValueError', 'exception.message': 'bad city' },
  };

  it('takes the status message, else the exception event', () => {
    expect(
      valid([tool({ code: 2, message: 'rate limited' }, [exception])]).record.trajectory?.[0]
        ?.error,
    ).toBe('rate limited');
    expect(valid([tool({ code: 2, message: '' }, [exception])]).record.trajectory?.[0]?.error).toBe(
      'ValueError: bad city',
    );
    expect(valid([tool({ code: 0, message: '' }, [exception])]).record.trajectory?.[0]?.error).toBe(
      'ValueError: bad city',
    );
    expect(valid([tool({ code: 2, message: '' })]).record.trajectory?.[0]?.error).toBe('error');
  });

  it('ignores an exception event on a span explicitly marked OK (LangGraph interrupts)', () => {
    const { record, summary } = valid([tool({ code: 1, message: '' }, [exception])]);
    expect(record.trajectory?.[0]?.error).toBe('');
    expect(summary.error).toBe(false);
  });

  it('drops a Python traceback appended to the status message', () => {
    const message = 'ValueError(\'bad city\')Traceback (most recent call last):\n  File "x.py"';
    expect(valid([tool({ code: 2, message })]).record.trajectory?.[0]?.error).toBe(
      "ValueError('bad city')",
    );
  });
});

describe('normalizeTrace: record fields', () => {
  it('reads labels: resource < other spans (earliest wins) < root', () => {
    const resource = {
      'service.name': 'svc',
      'touchstone.label.env': 'staging',
      'touchstone.label.region': 'eu',
      'touchstone.label.team': 'a',
      'mlflow.tag.touchstone.label.source': '"mlflow"',
    };
    const { record, summary } = valid([
      span('root', {
        start: 0,
        end: 100,
        resource,
        attrs: { 'gen_ai.operation.name': 'invoke_agent', 'touchstone.label.env': 'prod' },
      }),
      span('early', {
        parent: 'root',
        start: 1,
        end: 2,
        resource,
        attrs: {
          ...chat(),
          'touchstone.label.env': 'dev',
          'touchstone.label.team': 'b',
          'touchstone.label.n': 3,
        },
      }),
      span('late', {
        parent: 'root',
        start: 5,
        end: 6,
        resource,
        attrs: { ...chat(), 'touchstone.label.team': 'c', 'touchstone.label.obj': json({}) },
      }),
    ]);
    expect(record.labels).toEqual({
      env: 'prod',
      region: 'eu',
      team: 'b',
      n: '3',
      obj: '{}',
      source: 'mlflow',
    });
    expect(summary.labels).toEqual(record.labels);
  });

  it('reads labels of resources shared by many spans as if read for each span', () => {
    // The decoders give the spans of one resource one object; it is read once, and the root's
    // resource still wins over the resource of an earlier span.
    const a = { 'touchstone.label.team': 'a', 'touchstone.label.only': 'a' };
    const b = { 'touchstone.label.team': 'b', 'touchstone.label.region': 'eu' };
    const { record } = valid([
      span('root', { start: 0, end: 100, resource: a }),
      span('first', { parent: 'root', start: 1, end: 2, resource: b, attrs: chat() }),
      span('second', { parent: 'root', start: 3, end: 4, resource: a, attrs: chat() }),
    ]);
    expect(record.labels).toEqual({ team: 'a', only: 'a', region: 'eu' });
  });

  it('records service, root span, models, tools, conventions and the project in metadata', () => {
    const { record } = valid([
      span('agent', { start: 0, end: 100, attrs: { 'gen_ai.operation.name': 'invoke_agent' } }),
      span('c', {
        parent: 'agent',
        start: 1,
        end: 2,
        attrs: chat({ 'gen_ai.response.model': 'm-1' }),
      }),
    ]);
    expect(record.metadata).toEqual({
      service: 'travel-app',
      rootSpan: 'agent',
      models: ['m-1'],
      conventions: ['gen-ai'],
    });
    expect(normalizeTrace([], { project: 'p' }).record.metadata).toEqual({ project: 'p' });
    expect(record.provenance).toEqual({ traceId: TRACE_ID });
  });

  it('keeps raw attributes JSON-safe (bytes as base64)', () => {
    const { record } = valid([
      span('chat', {
        start: 0,
        end: 1,
        attrs: chat({ blob: new Uint8Array([1, 2, 3]), nested: { b: new Uint8Array([255]) } }),
      }),
    ]);
    expect(record.trajectory?.[0]?.attributes).toMatchObject({
      blob: 'AQID',
      nested: { b: '/w==' },
    });
  });
});

describe('normalizeTrace: the model that answered', () => {
  it('names a model call by its served model, also when only its wrapping span knows it', () => {
    const { record } = valid([
      span('agent', { start: 0, end: 100, attrs: { 'gen_ai.operation.name': 'invoke_agent' } }),
      // A provider span that only names the requested model, inside a framework span that read
      // the served one from the response: one call, and the served model names it.
      span('framework', {
        parent: 'agent',
        start: 1,
        end: 50,
        attrs: chat({ 'gen_ai.response.model': 'gpt-4o-2024-08-06' }),
      }),
      span('provider', { parent: 'framework', start: 2, end: 49, attrs: chat() }),
      span('second', {
        parent: 'agent',
        start: 60,
        end: 90,
        attrs: chat({ 'gen_ai.response.model': 'gpt-4o-2024-08-06' }),
      }),
    ]);
    const llm = record.trajectory?.filter((s) => s.type === 'llm');
    expect(llm?.map((s) => [s.name, s.model])).toEqual([
      ['provider', 'gpt-4o-2024-08-06'],
      ['second', 'gpt-4o-2024-08-06'],
    ]);
    expect(record.metadata?.models).toEqual(['gpt-4o-2024-08-06']);
  });

  it('keeps the requested model when no span names the served one', () => {
    const { record } = valid([span('chat', { start: 0, end: 1, attrs: chat() })]);
    expect(record.trajectory?.[0]?.model).toBe('gpt-4o');
  });
});

describe('normalizeTrace: no output from an empty reply', () => {
  const EMPTY_REPLIES: Array<[string, AttributeValue]> = [
    ['no parts', json([{ role: 'assistant', parts: [], finish_reason: 'stop' }])],
    ['blank text', json([{ role: 'assistant', parts: [{ type: 'text', content: ' ' }] }])],
  ];
  it.each(EMPTY_REPLIES)(
    'gives a failed run whose last model reply has %s no output, not the empty message',
    (_, reply) => {
      const { record } = valid([
        span('agent', {
          start: 0,
          end: 100,
          attrs: { 'gen_ai.operation.name': 'invoke_agent' },
          status: { code: 2, message: 'the model sent an empty message' },
        }),
        span('c1', {
          parent: 'agent',
          start: 1,
          end: 10,
          attrs: chat({
            'gen_ai.input.messages': json([
              { role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] },
            ]),
            'gen_ai.output.messages': json([
              {
                role: 'assistant',
                parts: [{ type: 'tool_call', id: 'c', name: 'get_weather', arguments: {} }],
              },
            ]),
          }),
        }),
        span('c2', {
          parent: 'agent',
          start: 20,
          end: 30,
          attrs: chat({ 'gen_ai.output.messages': reply }),
        }),
      ]);
      expect(record.input).toBe('Weather in Paris?');
      expect(record.output).toBeUndefined();
    },
  );
});

describe('normalizeTrace: garbage in, a record out', () => {
  it('handles an empty list, missing fields, cycles, duplicates and bad times', () => {
    expect(valid([]).record.trajectory).toEqual([]);
    const a = span('a', { id: 'a', parent: 'b', start: 0, end: 10, attrs: chat() });
    const b = span('b', { id: 'b', parent: 'a', start: 0, end: 10, attrs: chat() });
    const weird = {
      ...span('weird', { start: 0, end: 1 }),
      startTimeUnixNano: 'not-a-number',
      endTimeUnixNano: '99999999999999999999999999',
      status: undefined,
      events: [{ name: 'exception' }],
      resource: undefined,
      scope: undefined,
    } as unknown as Span;
    const out = valid([a, b, a, weird, { nonsense: true } as unknown as Span]);
    // The cycle is cut (b becomes a's parent); two nested model calls are one step (§11.3).
    expect(out.record.trajectory?.map((s) => s.name)).toEqual(['a']);
  });

  it('keeps the later-ended copy of a span sent twice, whichever copy comes first', () => {
    const open = span('chat', { id: 'c', start: 5, end: 5, attrs: chat() });
    const ended = span('chat', {
      id: 'c',
      start: 5,
      end: 40,
      attrs: chat({ 'gen_ai.response.model': 'gpt-4o-2024-08-06' }),
    });
    for (const spans of [
      [open, ended],
      [ended, open],
    ]) {
      const { record, summary } = valid(spans);
      expect(record.trajectory?.map((s) => s.model)).toEqual(['gpt-4o-2024-08-06']);
      expect(summary.durationMs).toBe(35);
    }
  });

  it('never throws on random attribute values under every key the readers read', () => {
    const keys = [
      'gen_ai.operation.name',
      'gen_ai.input.messages',
      'gen_ai.output.messages',
      'gen_ai.system_instructions',
      'gen_ai.tool.name',
      'gen_ai.tool.call.arguments',
      'gen_ai.tool.call.result',
      'gen_ai.usage.input_tokens',
      'gen_ai.retrieval.documents',
      'openinference.span.kind',
      'input.value',
      'input.mime_type',
      'output.value',
      'llm.input_messages.0.message.role',
      'llm.input_messages.0.message.contents.0.message_content.type',
      'llm.output_messages.1.message.tool_calls.0.tool_call.function.arguments',
      'llm.token_count.prompt',
      'llm.cost.total',
      'retrieval.documents.0.document.content',
      'metadata',
      'mlflow.spanType',
      'mlflow.spanInputs',
      'mlflow.spanOutputs',
      'mlflow.chat.tokenUsage',
      'mlflow.chat.messages',
      'langfuse.observation.type',
      'langfuse.observation.input',
      'langfuse.observation.output',
      'langfuse.observation.usage_details',
      'traceloop.span.kind',
      'traceloop.entity.input',
      'traceloop.entity.output',
      'gen_ai.prompt.0.content',
      'gen_ai.completion.0.tool_calls.0.arguments',
      'ai.operationId',
      'ai.prompt',
      'ai.prompt.messages',
      'ai.response.toolCalls',
      'ai.toolCall.args',
      'request_data',
      'events',
      'pydantic_ai.all_messages',
      'touchstone.label.x',
    ];
    const values: AttributeValue[] = [
      '',
      'chat',
      'LLM',
      '"TOOL"',
      'execute_tool',
      '{',
      '[{"role":',
      '[1,2,3]',
      '{"messages":[[1]]}',
      '[{"role":"user","parts":"nope"}]',
      '[{"role":"assistant","parts":[{"type":"tool_call"}]}]',
      '{"args":[],"kwargs":null}',
      '{"type":"tool","data":null}',
      "{'a': [1, (2, None)]}",
      'null',
      '-1',
      'NaN',
      Number.NaN,
      Number.POSITIVE_INFINITY,
      -5,
      1e300,
      true,
      new Uint8Array([0, 1]),
      [1, 'a', { b: [] }],
      { role: 'user', content: { nested: [null] } } as unknown as AttributeValue,
      [{ 'event.name': 'gen_ai.choice', message: 7 }] as unknown as AttributeValue,
    ];
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let round = 0; round < 300; round++) {
      const spans: Span[] = [];
      for (let i = 0; i < 4; i++) {
        const attrs: Record<string, AttributeValue> = {};
        for (let k = 0; k < 6; k++) attrs[keys[rand(keys.length)]!] = values[rand(values.length)]!;
        spans.push(
          span(`s${i}`, {
            id: `r${round}s${i}`,
            parent: i === 0 ? undefined : `r${round}s${rand(i)}`,
            start: rand(100),
            end: rand(200),
            attrs,
            events: rand(3) === 0 ? [{ name: 'gen_ai.user.message', attrs }] : [],
          }),
        );
      }
      valid(spans);
    }
  });
});
