import { describe, expect, it } from 'vitest';
import { RecordSchema } from '../../core/index.js';
import { normalizeTrace } from './index.js';
import {
  ANSWER,
  json,
  mlflowValue as m,
  QUESTION,
  SYSTEM,
  shuffled,
  span,
  stable,
  USER,
} from './spans.testkit.js';

/** LangGraph's prebuilt ReAct graph through its emitters (conventions reference §8). */

const CALLS = {
  role: 'assistant',
  toolCalls: [
    { id: 'call_w1', name: 'get_weather', arguments: '{"city": "Paris"}' },
    { id: 'call_t1', name: 'get_time', arguments: '{"tz": "Europe/Paris"}' },
  ],
};

function node(step: number, name: string) {
  return json({ langgraph_step: step, langgraph_node: name, thread_id: 'conv-42' });
}

function toolMessage(content: string, id: string, name: string, status = 'success') {
  return json({ type: 'tool', data: { content, tool_call_id: id, name, status } });
}

/** §8.1: OpenInference's LangChain instrumentor. */
function section81(clothesFail = false) {
  const chatAttrs = (prompt: number, final: boolean) => ({
    'openinference.span.kind': 'LLM',
    'llm.model_name': 'gpt-4o-2024-08-06',
    'llm.input_messages.0.message.role': 'system',
    'llm.input_messages.0.message.content': 'You are a travel helper.',
    'llm.input_messages.1.message.role': 'user',
    'llm.input_messages.1.message.content': QUESTION,
    ...(final
      ? {
          'llm.output_messages.0.message.role': 'assistant',
          'llm.output_messages.0.message.content': ANSWER,
        }
      : {
          'llm.output_messages.0.message.role': 'assistant',
          'llm.output_messages.0.message.tool_calls.0.tool_call.id': 'call_w1',
          'llm.output_messages.0.message.tool_calls.0.tool_call.function.name': 'get_weather',
          'llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments':
            '{"city": "Paris"}',
          'llm.output_messages.0.message.tool_calls.1.tool_call.id': 'call_t1',
          'llm.output_messages.0.message.tool_calls.1.tool_call.function.name': 'get_time',
          'llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments':
            '{"tz": "Europe/Paris"}',
        }),
    'llm.token_count.prompt': prompt,
    'llm.token_count.completion': final ? 25 : 40,
  });
  return [
    span('LangGraph', {
      start: 0,
      end: 2400,
      attrs: {
        'openinference.span.kind': 'CHAIN',
        'input.mime_type': 'application/json',
        'input.value': json({ messages: [['user', QUESTION]] }),
        'output.mime_type': 'application/json',
        'output.value': json({
          messages: [
            { type: 'human', data: { content: QUESTION } },
            { type: 'ai', data: { content: ANSWER } },
          ],
        }),
        'session.id': 'conv-42',
      },
    }),
    span('agent', {
      id: 'agent1',
      parent: 'LangGraph',
      start: 5,
      end: 905,
      attrs: { 'openinference.span.kind': 'AGENT', metadata: node(1, 'agent') },
    }),
    span('ChatOpenAI', {
      id: 'chat1',
      parent: 'agent1',
      start: 10,
      end: 900,
      attrs: chatAttrs(120, false),
    }),
    span('should_continue', {
      id: 'edge1',
      parent: 'agent1',
      start: 901,
      end: 902,
      attrs: { 'openinference.span.kind': 'CHAIN', 'output.value': 'tools' },
    }),
    span('tools', {
      start: 906,
      end: 1205,
      parent: 'LangGraph',
      attrs: { 'openinference.span.kind': 'CHAIN', metadata: node(2, 'tools') },
    }),
    span('get_weather', {
      parent: 'tools',
      start: 910,
      end: 1100,
      attrs: {
        'openinference.span.kind': 'TOOL',
        'tool.name': 'get_weather',
        'input.value': "{'city': 'Paris'}",
        'input.mime_type': 'application/json',
        'output.mime_type': 'application/json',
        'output.value': toolMessage('{"temp_c": 18, "sky": "sunny"}', 'call_w1', 'get_weather'),
      },
    }),
    span('get_time', {
      parent: 'tools',
      start: 1110,
      end: 1200,
      attrs: {
        'openinference.span.kind': 'TOOL',
        'tool.name': 'get_time',
        'input.value': "{'tz': 'Europe/Paris'}",
        'input.mime_type': 'application/json',
        'output.mime_type': 'application/json',
        'output.value': clothesFail
          ? toolMessage(
              'Error: TimeoutError()\n Please fix your mistakes.',
              'call_t1',
              'get_time',
              'error',
            )
          : toolMessage('14:05', 'call_t1', 'get_time'),
      },
    }),
    span('agent', {
      id: 'agent2',
      parent: 'LangGraph',
      start: 1206,
      end: 2395,
      attrs: { 'openinference.span.kind': 'AGENT', metadata: node(3, 'agent') },
    }),
    span('ChatOpenAI', {
      id: 'chat2',
      parent: 'agent2',
      start: 1210,
      end: 2390,
      attrs: chatAttrs(210, true),
    }),
  ];
}

describe('LangGraph via OpenInference (§8.1)', () => {
  it('keeps the graph root as the agent step and drops nodes, edges and sequences', () => {
    const { record } = normalizeTrace(shuffled(section81()));
    expect(record.trajectory?.map(stable)).toEqual([
      // The graph's state in and out ({"messages": […]}), read as the question and the answer.
      { type: 'agent', name: 'LangGraph', input: QUESTION, output: ANSWER },
      {
        type: 'llm',
        name: 'ChatOpenAI',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [CALLS],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160 },
      },
      // The Python repr input gives way to the model's arguments (linked by the ToolMessage id).
      {
        type: 'tool',
        name: 'get_weather',
        input: '{"city": "Paris"}',
        output: { temp_c: 18, sky: 'sunny' },
      },
      { type: 'tool', name: 'get_time', input: '{"tz": "Europe/Paris"}', output: '14:05' },
      {
        type: 'llm',
        name: 'ChatOpenAI',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [{ role: 'assistant', content: ANSWER }],
        usage: { inputTokens: 210, outputTokens: 25, totalTokens: 235 },
      },
    ]);
    const root = record.trajectory?.[0]?.spanId;
    expect(record.trajectory?.slice(1).every((s) => s.parentSpanId === root)).toBe(true);
    expect(record.input).toBe(QUESTION);
    expect(record.output).toBe(ANSWER);
    expect(record.metadata).toMatchObject({ sessionId: 'conv-42' });
    expect(RecordSchema.safeParse(record).success).toBe(true);
  });

  it('reads a ToolNode-caught tool failure (ToolMessage status "error") as the step error', () => {
    const { record, summary } = normalizeTrace(section81(true));
    const time = record.trajectory?.find((s) => s.name === 'get_time');
    expect(time?.error).toBe('Error: TimeoutError()\n Please fix your mistakes.');
    expect(time?.output).toBe('Error: TimeoutError()\n Please fix your mistakes.');
    expect(summary.error).toBe(true);
  });
});

/** §8.2: MLflow's LangChain autolog; every span JSON-encoded, nodes and edges are CHAIN. */
function section82() {
  const chat = (
    id: string,
    parent: string,
    start: number,
    end: number,
    final: boolean,
    prompt: number,
  ) =>
    span('ChatOpenAI', {
      id,
      parent,
      start,
      end,
      attrs: {
        'mlflow.spanType': m('CHAT_MODEL'),
        'mlflow.spanInputs': m([
          [
            { type: 'system', content: 'You are a travel helper.' },
            { type: 'human', content: QUESTION },
          ],
        ]),
        'mlflow.spanOutputs': m({
          generations: [
            [
              {
                text: final ? ANSWER : '',
                message: final
                  ? { type: 'ai', content: ANSWER }
                  : {
                      type: 'ai',
                      content: '',
                      tool_calls: [
                        {
                          name: 'get_weather',
                          args: { city: 'Paris' },
                          id: 'call_w1',
                          type: 'tool_call',
                        },
                        {
                          name: 'get_time',
                          args: { tz: 'Europe/Paris' },
                          id: 'call_t1',
                          type: 'tool_call',
                        },
                      ],
                    },
              },
            ],
          ],
          llm_output: {
            token_usage: { prompt_tokens: prompt, completion_tokens: final ? 25 : 40 },
            model_name: 'gpt-4o-2024-08-06',
          },
        }),
        invocation_params: m({ model: 'gpt-4o' }),
      },
    });
  return [
    span('LangGraph', {
      start: 0,
      end: 2400,
      attrs: {
        'mlflow.spanType': m('CHAIN'),
        'mlflow.spanInputs': m({ messages: [['user', QUESTION]] }),
      },
    }),
    span('agent', {
      id: 'a1',
      parent: 'LangGraph',
      start: 5,
      end: 905,
      attrs: { 'mlflow.spanType': m('CHAIN'), metadata: m({ langgraph_node: 'agent' }) },
    }),
    chat('c1', 'a1', 10, 900, false, 120),
    span('tools', {
      parent: 'LangGraph',
      start: 906,
      end: 1205,
      attrs: { 'mlflow.spanType': m('CHAIN') },
    }),
    span('get_weather', {
      parent: 'tools',
      start: 910,
      end: 1100,
      attrs: {
        'mlflow.spanType': m('TOOL'),
        'mlflow.spanInputs': m({ city: 'Paris' }),
        'mlflow.spanOutputs': m({
          content: '{"temp_c": 18, "sky": "sunny"}',
          type: 'tool',
          tool_call_id: 'call_w1',
          name: 'get_weather',
          status: 'success',
        }),
      },
    }),
    span('get_time', {
      parent: 'tools',
      start: 1110,
      end: 1200,
      attrs: {
        'mlflow.spanType': m('TOOL'),
        'mlflow.spanInputs': m({ tz: 'Europe/Paris' }),
        'mlflow.spanOutputs': m({
          content: '14:05',
          type: 'tool',
          tool_call_id: 'call_t1',
          status: 'success',
        }),
      },
    }),
    span('agent', {
      id: 'a2',
      parent: 'LangGraph',
      start: 1206,
      end: 2395,
      attrs: { 'mlflow.spanType': m('CHAIN') },
    }),
    chat('c2', 'a2', 1210, 2390, true, 210),
  ];
}

describe('LangGraph via MLflow autolog (§8.2)', () => {
  it('keeps model and tool spans, drops every CHAIN but the root', () => {
    const { record } = normalizeTrace(shuffled(section82()));
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'LangGraph', input: QUESTION },
      {
        type: 'llm',
        name: 'ChatOpenAI',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [
          {
            role: 'assistant',
            toolCalls: [
              { id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' },
              { id: 'call_t1', name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
            ],
          },
        ],
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160 },
      },
      {
        type: 'tool',
        name: 'get_weather',
        input: '{"city":"Paris"}',
        output: { temp_c: 18, sky: 'sunny' },
      },
      { type: 'tool', name: 'get_time', input: '{"tz":"Europe/Paris"}', output: '14:05' },
      {
        type: 'llm',
        name: 'ChatOpenAI',
        model: 'gpt-4o-2024-08-06',
        input: [SYSTEM, USER],
        output: [{ role: 'assistant', content: ANSWER }],
        usage: { inputTokens: 210, outputTokens: 25, totalTokens: 235 },
      },
    ]);
    // No root output: the record's output is the last model call's answer.
    expect(record.output).toBe(ANSWER);
    expect(record.usage).toMatchObject({ inputTokens: 330, outputTokens: 65, totalTokens: 395 });
  });
});

describe('LangGraph via OpenLLMetry (§8.3)', () => {
  it('makes the root workflow the agent and nested workflows and tasks containers', () => {
    const { record } = normalizeTrace([
      span('LangGraph.workflow', {
        start: 0,
        end: 100,
        attrs: {
          'traceloop.span.kind': 'workflow',
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.agent.name': 'LangGraph',
          'gen_ai.provider.name': 'langgraph',
          'gen_ai.conversation.id': 'conv-42',
        },
      }),
      span('RunnableSequence.workflow', {
        parent: 'LangGraph.workflow',
        start: 1,
        end: 50,
        attrs: { 'traceloop.span.kind': 'workflow', 'gen_ai.operation.name': 'invoke_agent' },
      }),
      span('execute_task agent', {
        parent: 'RunnableSequence.workflow',
        start: 2,
        end: 40,
        attrs: { 'traceloop.span.kind': 'task', 'gen_ai.operation.name': 'execute_task' },
      }),
      span('ChatOpenAI.chat', {
        parent: 'execute_task agent',
        kind: 3,
        start: 3,
        end: 30,
        attrs: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.request.model': 'gpt-4o',
          'gen_ai.usage.input_tokens': 10,
          'gen_ai.usage.output_tokens': 2,
        },
      }),
      span('execute_tool get_weather', {
        parent: 'LangGraph.workflow',
        start: 60,
        end: 70,
        attrs: {
          'traceloop.span.kind': 'tool',
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'get_weather',
          'gen_ai.tool.call.arguments': json({
            input_str: "{'city': 'Paris'}",
            tags: [],
            metadata: {},
            inputs: { city: 'Paris' },
            kwargs: {},
          }),
          'gen_ai.tool.call.result': json({
            output: { type: 'tool', data: { content: 'sunny', tool_call_id: 'call_w1' } },
            kwargs: {},
          }),
        },
      }),
    ]);
    expect(record.trajectory?.map(stable)).toEqual([
      { type: 'agent', name: 'LangGraph' },
      {
        type: 'llm',
        name: 'ChatOpenAI.chat',
        model: 'gpt-4o',
        usage: { inputTokens: 10, outputTokens: 2, totalTokens: 12 },
      },
      { type: 'tool', name: 'get_weather', input: '{"city":"Paris"}', output: 'sunny' },
    ]);
    expect(record.metadata).toMatchObject({ sessionId: 'conv-42' });
  });
});
