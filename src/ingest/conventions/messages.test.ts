import { describe, expect, it } from 'vitest';
import { readMessages } from './messages.js';
import { requestMessages, responseMessages } from './payloads.js';
import { parsePythonLiteral } from './values.js';

describe('readMessages: one message form for every dialect', () => {
  it('reads Anthropic content blocks (tool_use, tool_result, thinking)', () => {
    expect(
      readMessages([
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'hmm' },
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'tu_1', name: 'get_weather', input: { city: 'Paris' } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'tu_1',
              content: [{ type: 'text', text: 'sunny' }],
            },
            { type: 'text', text: 'And tomorrow?' },
          ],
        },
      ]),
    ).toEqual([
      {
        role: 'assistant',
        content: 'Checking.',
        toolCalls: [{ id: 'tu_1', name: 'get_weather', arguments: '{"city":"Paris"}' }],
      },
      { role: 'tool', toolCallId: 'tu_1', content: 'sunny' },
      { role: 'user', content: 'And tomorrow?' },
    ]);
  });

  it('reads Gemini parts (role model, function_call, function_response)', () => {
    expect(
      readMessages([
        {
          role: 'model',
          parts: [{ function_call: { id: 'f1', name: 'lookup', args: { q: 'x' } } }],
        },
        {
          role: 'user',
          parts: [{ function_response: { id: 'f1', name: 'lookup', response: { ok: 1 } } }],
        },
      ]),
    ).toEqual([
      { role: 'assistant', toolCalls: [{ id: 'f1', name: 'lookup', arguments: '{"q":"x"}' }] },
      { role: 'tool', toolCallId: 'f1', name: 'lookup', content: { ok: 1 } },
    ]);
  });

  it('reads LangChain constructors, dumps and (role, text) tuples', () => {
    expect(
      readMessages([
        ['user', 'hi'],
        {
          lc: 1,
          type: 'constructor',
          id: ['langchain', 'schema', 'messages', 'AIMessage'],
          kwargs: { content: '', tool_calls: [{ name: 'f', args: { a: 1 }, id: 'c1' }] },
        },
        { type: 'tool', content: '{"r": 2}', tool_call_id: 'c1', status: 'success' },
        { type: 'ai', data: { content: 'done' } },
      ]),
    ).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', toolCalls: [{ id: 'c1', name: 'f', arguments: '{"a":1}' }] },
      { role: 'tool', toolCallId: 'c1', content: { r: 2 } },
      { role: 'assistant', content: 'done' },
    ]);
  });

  it('keeps malformed tool arguments exactly and images as parts', () => {
    expect(
      readMessages({
        role: 'assistant',
        tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: '{"a": ' } }],
      }),
    ).toEqual([{ role: 'assistant', toolCalls: [{ id: 'x', name: 'f', arguments: '{"a": ' }] }]);
    expect(
      readMessages([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: 'data:…' } },
          ],
        },
      ]),
    ).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is this?' },
          { type: 'image_url', image_url: { url: 'data:…' } },
        ],
      },
    ]);
  });

  it('refuses lists with non-messages (an opaque value is not a transcript)', () => {
    expect(readMessages([{ role: 'user', content: 'a' }, { foo: 1 }])).toBeUndefined();
    expect(readMessages({ messages: [] })).toBeUndefined();
    expect(readMessages('text')).toBeUndefined();
    expect(readMessages([])).toBeUndefined();
  });
});

describe('provider payloads', () => {
  it('reads an OpenAI Responses request and response', () => {
    expect(
      requestMessages({
        model: 'gpt-4o',
        instructions: 'Be brief.',
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
          { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: 'ok' },
        ],
      }),
    ).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', toolCalls: [{ id: 'c1', name: 'f', arguments: '{}' }] },
      { role: 'tool', toolCallId: 'c1', content: 'ok' },
    ]);
    expect(
      responseMessages({
        object: 'response',
        output: [
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'yo' }] },
        ],
      }),
    ).toEqual([{ role: 'assistant', content: 'yo' }]);
  });

  it('reads an Anthropic request with a top-level system prompt', () => {
    expect(
      requestMessages({
        model: 'claude',
        system: 'Be kind.',
        messages: [{ role: 'user', content: 'hi' }],
      }),
    ).toEqual([
      { role: 'system', content: 'Be kind.' },
      { role: 'user', content: 'hi' },
    ]);
  });
});

describe('parsePythonLiteral', () => {
  it('reads dict/list/tuple/str/number/bool/None literals and refuses anything else', () => {
    expect(parsePythonLiteral("{'a': [1, (2.5, None)], 'b': True, \"c\": 'it\\'s'}")).toEqual({
      ok: true,
      value: { a: [1, [2.5, null]], b: true, c: "it's" },
    });
    expect(parsePythonLiteral("Send(node='tools')").ok).toBe(false);
    expect(parsePythonLiteral("{'a': 1} trailing").ok).toBe(false);
    expect(parsePythonLiteral('[[[[').ok).toBe(false);
  });
});
