import { describe, expect, it } from 'vitest';
import { issuesToDetails } from '../../core/index.js';
import { formatJsonPath, parseJsonPath, readJsonPath } from './json-path.js';
import { EnvironmentSchema, HarnessSchema, TargetSpecSchema } from './schema.js';
import { renderTemplate, unknownPlaceholders } from './template.js';

function problems(input: unknown): string[] {
  const r = TargetSpecSchema.safeParse(input);
  return r.success ? [] : issuesToDetails(r.error.issues, 'target').map((d) => d.path);
}

describe('target spec schema', () => {
  it('parses each kind with defaults, durations in ms', () => {
    const openai = TargetSpecSchema.parse({
      kind: 'openai-compatible',
      baseUrl: 'https://api.example.com/v1',
      model: 'm',
      apiKeyEnv: 'OPENAI_API_KEY',
      params: { temperature: 0.2, max_tokens: 64 },
      timeout: '1m30s',
    });
    expect(openai).toMatchObject({ retries: 2, timeout: 90_000, params: { temperature: 0.2 } });
    const http = TargetSpecSchema.parse({ kind: 'http', url: 'https://agent.example.com/run' });
    expect(http).toMatchObject({
      method: 'POST',
      bodyTemplate: '{"input": {{input}}}',
      outputPath: '$',
    });
    const command = TargetSpecSchema.parse({ kind: 'command', argv: ['python3', 'agent.py'] });
    expect(command).toMatchObject({ stdout: 'text' });
    expect(HarnessSchema.parse(undefined)).toBe('single-turn');
    expect(EnvironmentSchema.parse(undefined)).toEqual({ env: [], timeout: 60_000 });
  });

  it('names every bad field', () => {
    expect(
      problems({
        kind: 'openai-compatible',
        baseUrl: 'ftp://x',
        model: '',
        apiKeyEnv: 'NOT-A-NAME',
        params: { temperature: 9, model: 'other' },
        colour: 'blue',
      }).sort(),
    ).toEqual(
      [
        'target.baseUrl',
        'target.model',
        'target.apiKeyEnv',
        'target.params.temperature',
        'target.params.model',
        'target.colour',
      ].sort(),
    );
    expect(problems({ kind: 'shell', argv: ['x'] })).toEqual(['target.kind']);
    expect(problems({ kind: 'command', argv: [] })).toEqual(['target.argv']);
    expect(problems({ kind: 'command', argv: ['x'], timeout: 'soon' })).toEqual(['target.timeout']);
  });

  it('refuses literal secret headers, unknown placeholders, bad paths and non-JSON templates', () => {
    const bad = problems({
      kind: 'http',
      url: 'https://user:pw@agent.example.com/',
      headers: { Authorization: 'Bearer sk-123', 'X-Trace': 'ok', 'bad header': 'x' },
      bodyTemplate: '{"q": {{inptu}}}',
      outputPath: 'choices[0]',
    });
    expect(bad.sort()).toEqual(
      [
        'target.url',
        'target.headers.Authorization',
        'target.headers.bad header',
        'target.bodyTemplate',
        'target.outputPath',
      ].sort(),
    );
    expect(
      problems({ kind: 'http', url: 'http://a.example/', bodyTemplate: '{"q": {{input}}' }),
    ).toEqual(['target.bodyTemplate']);
    // A non-JSON content type may have any body.
    expect(
      problems({
        kind: 'http',
        url: 'http://a.example/',
        headers: { 'content-type': 'text/plain' },
        bodyTemplate: 'Q: {{input}}',
      }),
    ).toEqual([]);
    expect(
      problems({
        kind: 'http',
        url: 'http://a.example/',
        headers: { Authorization: { env: 'AGENT_TOKEN', prefix: 'Bearer ' } },
      }),
    ).toEqual([]);
  });

  it('refuses a duplicated environment variable and an out-of-range timeout', () => {
    const r = EnvironmentSchema.safeParse({ env: ['A', 'A'], timeout: '2h' });
    expect(r.success).toBe(false);
    expect(issuesToDetails(r.error?.issues ?? [], 'environment').map((d) => d.path)).toEqual([
      'environment.env',
      'environment.timeout',
    ]);
  });
});

describe('body template', () => {
  it('substitutes JSON values outside strings and escaped text inside them', () => {
    const input = 'say "hi"\n';
    expect(
      JSON.parse(
        renderTemplate('{"q": {{input}}, "id": {{recordId}}, "t": {{trial}}}', {
          input,
          recordId: 'r1',
          trial: 2,
        }),
      ),
    ).toEqual({ q: input, id: 'r1', t: 2 });
    expect(
      JSON.parse(
        renderTemplate('{"prompt": "Q: {{ input }} (\\"{{recordId}}\\")"}', {
          input,
          recordId: 'r"1',
          trial: 0,
        }),
      ),
    ).toEqual({ prompt: `Q: ${input} ("r"1")` });
    expect(
      JSON.parse(
        renderTemplate('{"a": {{input}}, "b": "{{input}}"}', {
          input: { x: [1, '"'] },
          recordId: undefined,
          trial: 0,
        }),
      ),
    ).toEqual({ a: { x: [1, '"'] }, b: '{"x":[1,"\\""]}' });
    expect(renderTemplate('{"a": {{input}}}', { input: undefined, recordId: 'r', trial: 0 })).toBe(
      '{"a": null}',
    );
  });
});

describe('output path', () => {
  it('reads names, quoted names and indexes', () => {
    const doc = { choices: [{ message: { content: 'hi', 'odd key': 1 } }] };
    const path = parseJsonPath('$.choices[0].message.content');
    expect(path).toEqual(['choices', 0, 'message', 'content']);
    expect(readJsonPath(doc, path as never)).toEqual({ found: true, value: 'hi' });
    expect(readJsonPath(doc, parseJsonPath("$.choices[0].message['odd key']") as never)).toEqual({
      found: true,
      value: 1,
    });
    expect(readJsonPath(doc, parseJsonPath('$') as never)).toEqual({ found: true, value: doc });
    const missing = readJsonPath(doc, parseJsonPath('$.choices[1].message') as never);
    expect(missing).toEqual({ found: false, at: 1 });
    expect(formatJsonPath(['choices', 1, 'a b'], 3)).toBe('$.choices[1]["a b"]');
    expect(parseJsonPath('$..x')).toMatch(/field name/);
    expect(parseJsonPath('$[*]')).toMatch(/index/);
  });

  it('reads escapes in quoted names; a backslash always escapes', () => {
    expect(parseJsonPath("$['a\\'b']")).toEqual(["a'b"]);
    expect(parseJsonPath('$["a\\\\"]')).toEqual(['a\\']);
    expect(parseJsonPath("$['it\\'s'][0]")).toEqual(["it's", 0]);
    expect(parseJsonPath("$['a\\']")).toMatch(/expected \[index\]/);
  });

  it('refuses an unclosed quoted name of backslashes at once (it backtracked exponentially)', () => {
    const started = performance.now();
    expect(parseJsonPath(`$['${'\\'.repeat(500)}`)).toMatch(/expected \[index\]/);
    expect(parseJsonPath(`$["${'\\'.repeat(509)}`)).toMatch(/expected \[index\]/);
    expect(performance.now() - started).toBeLessThan(500);
  });
});

describe('unknown placeholders', () => {
  it.each([
    ['{"q": {{input}}}', []],
    ['{"q": {{ inptu }}, "r": {{recordId}}}', ['inptu']],
    ['{{a}}{{a}}{{ b\n}}', ['a', 'b']],
    ['{{{x}}', ['{x']],
    ['{{a}b}} {{c}}', ['c']],
    ['{{ }}', ['']],
    ['{{x', []],
    ['x}}', []],
  ])('%j → %j', (template, names) => {
    expect(unknownPlaceholders(template)).toEqual(names);
  });

  it('scans a template of a million spaces in linear time (the regex took seconds per thousand)', () => {
    const started = performance.now();
    expect(unknownPlaceholders(`{{${' '.repeat(1_000_000)}`)).toEqual([]);
    expect(unknownPlaceholders('{{ }'.repeat(250_000))).toEqual([]);
    expect(unknownPlaceholders('{{'.repeat(500_000))).toEqual([]);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
