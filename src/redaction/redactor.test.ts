import { describe, expect, it } from 'vitest';
import { type Attributes, isTouchstoneError, type Span } from '../core/index.js';
import {
  compileRedaction,
  MAX_DEPTH,
  REDACTED,
  type RedactionConfig,
  SLICE_CHARS,
} from './index.js';

function span(over: Partial<Span> = {}): Span {
  return {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: '00f067aa0ba902b7',
    parentSpanId: '',
    name: 'chat gpt-4o',
    kind: 3,
    startTimeUnixNano: '1763712000000000000',
    endTimeUnixNano: '1763712000500000000',
    attributes: {},
    events: [],
    links: [],
    status: { code: 0, message: '' },
    resource: { 'service.name': 'agent' },
    scope: { name: 'openinference', version: '0.1.0' },
    ...over,
  };
}

function compileError(config: RedactionConfig): unknown {
  try {
    compileRedaction(config);
  } catch (err) {
    return err;
  }
  throw new Error('expected compileRedaction to throw');
}

describe('compileRedaction: invalid rules', () => {
  it('names an invalid RE2 pattern by its config path, never by its contents', () => {
    const rule = '(?<=hunter2-SECRET)x';
    const err = compileError({ patterns: ['ok-[0-9]+', 'fine', rule] });
    expect(isTouchstoneError(err)).toBe(true);
    if (!isTouchstoneError(err)) return;
    expect(err.code).toBe('REDACTION_RULE_INVALID');
    expect(err.kind).toBe('invalid_argument');
    expect(err.message).toContain('traces.redaction.patterns[2]');
    expect(err.details).toEqual([
      { path: 'traces.redaction.patterns[2]', message: 'not a valid RE2 regular expression' },
    ]);
    const everything = JSON.stringify({
      m: err.message,
      d: err.details,
      s: err.stack,
      c: err.cause,
    });
    expect(everything).not.toContain('hunter2');
    expect(everything).not.toContain('(?<=');
    expect(err.cause).toBeUndefined();
  });

  it('reports every invalid rule: globs, patterns and detector names', () => {
    const err = compileError({
      keys: ['ok_*', '[secret-glob]', ''],
      patterns: ['(unclosed-secret'],
      pii: ['email', 'passport' as 'email'],
    });
    if (!isTouchstoneError(err)) throw err;
    expect(err.details.map((d) => d.path)).toEqual([
      'traces.redaction.keys[1]',
      'traces.redaction.keys[2]',
      'traces.redaction.patterns[0]',
      'traces.redaction.pii[1]',
    ]);
    const everything = JSON.stringify({ m: err.message, d: err.details });
    for (const secret of ['secret-glob', 'unclosed-secret', 'passport']) {
      expect(everything).not.toContain(secret);
    }
  });

  it('validates rules even when redaction is disabled', () => {
    expect(() => compileRedaction({ disabled: true, patterns: ['('] })).toThrow(
      /traces\.redaction\.patterns\[0\]/,
    );
  });
});

describe('disabled: true', () => {
  const off = compileRedaction({ disabled: true, pii: ['email', 'credit-card'] });

  it('passes everything through unchanged (same objects)', () => {
    expect(off.enabled).toBe(false);
    const bytes = new Uint8Array([1, 2, 3]);
    const attrs: Attributes = { password: 'hunter2', mail: 'a@b.com', blob: bytes };
    const spans = [span({ attributes: attrs, status: { code: 2, message: 'password=x' } })];
    expect(off.redactSpans(spans)).toBe(spans);
    expect(off.redactAttributes(attrs)).toBe(attrs);
    expect(off.redactText('token=abc 4111111111111111')).toBe('token=abc 4111111111111111');
    const labels = { token: 't' };
    expect(off.redactLabels(labels)).toBe(labels);
    const json = { api_key: 'k' };
    expect(off.redactJson(json)).toBe(json);
  });
});

describe('attributes', () => {
  const r = compileRedaction({ pii: ['email'], patterns: ['sk-[A-Za-z0-9]{8,}'] });

  it('replaces the whole value of a redacted key, whatever its type', () => {
    expect(
      r.redactAttributes({
        password: 'hunter2',
        'http.request.header.authorization': ['Bearer abc', 'Basic xyz'],
        'db.connection.private_key': { pem: '---' },
        token: 123456,
        'app.api_key': true,
      }),
    ).toEqual({
      password: REDACTED,
      'http.request.header.authorization': REDACTED,
      'db.connection.private_key': REDACTED,
      token: REDACTED,
      'app.api_key': REDACTED,
    });
  });

  it('keeps token counts and other numbers', () => {
    const attrs = {
      'gen_ai.usage.input_tokens': 1234,
      'llm.token_count.prompt': 99,
      max_tokens: 512,
    };
    expect(r.redactAttributes(attrs)).toBe(attrs);
  });

  it('replaces only the matched part of string values, at any depth', () => {
    expect(
      r.redactAttributes({
        note: 'write to jane@example.com please',
        list: ['key sk-ABCDEFGH123', 'plain'],
        kv: { inner: { deeper: 'sk-ZZZZZZZZZZ end' } },
      }),
    ).toEqual({
      note: 'write to [REDACTED] please',
      list: ['key [REDACTED]', 'plain'],
      kv: { inner: { deeper: '[REDACTED] end' } },
    });
  });

  it('drops bytes values, also inside arrays and kvlists', () => {
    const out = r.redactAttributes({
      raw: new Uint8Array([104, 105]),
      list: ['a', new Uint8Array([1]), 'b'],
      kv: { blob: new Uint8Array([2]), keep: 1 },
    });
    expect(out).toEqual({ list: ['a', 'b'], kv: { keep: 1 } });
    expect('raw' in out).toBe(false);
  });

  it('redacts keys and values inside JSON held in a string, and re-serializes it', () => {
    const out = r.redactAttributes({
      'gen_ai.input.messages': JSON.stringify([
        { role: 'user', content: 'mail me: bob@example.org' },
        { role: 'tool', metadata: { api_key: 'k-1', Authorization: 'Bearer x' } },
      ]),
      nested: JSON.stringify({ payload: JSON.stringify({ secret: 's' }) }),
      spaced: '  {"password": "p"}',
    });
    expect(JSON.parse(out['gen_ai.input.messages'] as string)).toEqual([
      { role: 'user', content: 'mail me: [REDACTED]' },
      { role: 'tool', metadata: { api_key: REDACTED, Authorization: REDACTED } },
    ]);
    expect(JSON.parse(JSON.parse(out.nested as string).payload)).toEqual({ secret: REDACTED });
    expect(JSON.parse(out.spaced as string)).toEqual({ password: REDACTED });
  });

  it('keeps JSON text byte for byte when nothing in it changes', () => {
    const text = '{ "a" : 1,\n  "b": [true, null] }';
    const attrs = { json: text };
    expect(r.redactAttributes(attrs)).toBe(attrs);
  });

  it('finds `"key": value` pairs in JSON that does not parse (cut by the size cap)', () => {
    const cut =
      '{"messages":[{"role":"user"}],"api_key":"sk_live_abc","token": 42, "x": "…[truncated 120 bytes]';
    const out = r.redactAttributes({ body: cut }).body as string;
    expect(out).not.toContain('sk_live_abc');
    expect(out).not.toContain('42');
    expect(out).toContain('"messages"');
  });

  it('replaces nesting deeper than MAX_DEPTH whole instead of recursing', () => {
    let deep: Attributes = { leaf: 'x' };
    for (let i = 0; i < MAX_DEPTH + 10; i++) deep = { d: deep };
    const out = r.redactAttributes({ deep });
    expect(JSON.stringify(out)).toContain(REDACTED);
    expect(JSON.stringify(out)).not.toContain('leaf');
    const text = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    expect(() => r.redactAttributes({ text })).not.toThrow();
  });

  it('keeps hex trace and span ids under id keys even when all digits', () => {
    const c = compileRedaction({ pii: ['credit-card'] });
    const attrs = { spanId: '4111111111111111', other: '4111111111111111' };
    expect(c.redactAttributes(attrs)).toEqual({ spanId: '4111111111111111', other: REDACTED });
  });

  it('redacts integer attributes that are card numbers when credit-card is on', () => {
    const c = compileRedaction({ pii: ['credit-card'] });
    expect(c.redactAttributes({ pan: 4111111111111111, ts: 1763712000001, n: 42 })).toEqual({
      pan: REDACTED,
      ts: 1763712000001,
      n: 42,
    });
  });

  it('never mutates its input and returns the input itself when nothing changed', () => {
    const attrs: Attributes = { password: 'p', nested: { token: 't' }, list: ['a@b.com'] };
    const before = structuredClone(attrs);
    const out = r.redactAttributes(attrs);
    expect(attrs).toEqual(before);
    expect(out).not.toBe(attrs);
    const clean = { model: 'gpt-4o', n: 1, nested: { a: ['b'] } };
    expect(r.redactAttributes(clean)).toBe(clean);
  });

  it('treats a `__proto__` key as data', () => {
    const parsed = JSON.parse('{"__proto__": {"password": "p"}, "a": "jane@example.com"}');
    const out = r.redactJson(parsed) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"password":"[REDACTED]"},"a":"[REDACTED]"}');
  });
});

describe('spans', () => {
  const r = compileRedaction({ pii: ['email'] });

  it('redacts each distinct resource once and shares the result', () => {
    const resource = { 'service.name': 'agent', 'deployment.owner': 'ops@example.com' };
    const other = { 'service.name': 'other' };
    const spans = [
      span({ resource }),
      span({ resource, spanId: '00f067aa0ba902b8' }),
      span({ resource: other }),
    ];
    const out = r.redactSpans(spans);
    expect(out[0]!.resource).toEqual({ 'service.name': 'agent', 'deployment.owner': REDACTED });
    expect(out[1]!.resource).toBe(out[0]!.resource);
    expect(out[2]).toBe(spans[2]);
    expect(resource['deployment.owner']).toBe('ops@example.com');
  });

  it('covers span, event and link attributes and the status text; keeps names and ids', () => {
    const input = span({
      attributes: { 'user.email': 'a@example.com', password: 'x' },
      events: [
        {
          name: 'exception',
          timeUnixNano: '1',
          attributes: { 'exception.message': 'for b@example.com' },
        },
        { name: 'clean', timeUnixNano: '2', attributes: { ok: 1 } },
      ],
      links: [{ traceId: 'ab'.repeat(16), spanId: 'cd'.repeat(8), attributes: { cookie: 'c=1' } }],
      status: { code: 2, message: 'login failed for c@example.com: password=hunter2' },
    });
    const [out] = r.redactSpans([input]);
    expect(out!.attributes).toEqual({ 'user.email': REDACTED, password: REDACTED });
    expect(out!.events[0]!.attributes).toEqual({ 'exception.message': 'for [REDACTED]' });
    expect(out!.events[0]!.name).toBe('exception');
    expect(out!.events[1]).toBe(input.events[1]);
    expect(out!.links[0]).toEqual({
      traceId: 'ab'.repeat(16),
      spanId: 'cd'.repeat(8),
      attributes: { cookie: REDACTED },
    });
    expect(out!.status).toEqual({
      code: 2,
      message: 'login failed for [REDACTED]: password=[REDACTED]',
    });
    expect(out!.name).toBe(input.name);
    expect([out!.traceId, out!.spanId, out!.parentSpanId]).toEqual([
      input.traceId,
      input.spanId,
      '',
    ]);
  });

  it('returns spans with nothing to redact as they are', () => {
    const spans = [span({ attributes: { 'gen_ai.request.model': 'gpt-4o' } })];
    const out = r.redactSpans(spans);
    expect(out).not.toBe(spans);
    expect(out[0]).toBe(spans[0]);
  });
});

describe('spans in slices', () => {
  const r = compileRedaction({});
  const big = (i: number) =>
    span({
      spanId: `00f067aa0ba902${String(i).padStart(2, '0')}`,
      attributes: { 'input.value': `${'word '.repeat(SLICE_CHARS / 10)} Bearer tok${i}en123` },
    });

  it('gives what redactSpans gives, pausing about every SLICE_CHARS characters read', async () => {
    const spans = [0, 1, 2, 3, 4, 5].map(big);
    let pauses = 0;
    const out = await r.redactSpansInSlices(spans, async () => {
      pauses++;
    });
    expect(out).toEqual(r.redactSpans(spans));
    expect(out[0]!.attributes['input.value']).toMatch(/Bearer \[REDACTED\]$/);
    expect(pauses).toBeGreaterThanOrEqual(2);
    expect(pauses).toBeLessThanOrEqual(3);
  });

  it('does not pause for small requests, and shares a resource across slices', async () => {
    let pauses = 0;
    const pause = async () => {
      pauses++;
    };
    const small = [span(), span({ spanId: '00f067aa0ba902b8' })];
    await r.redactSpansInSlices(small, pause);
    expect(pauses).toBe(0);
    const resource = { 'service.name': 'agent', password: 'x' };
    const out = await r.redactSpansInSlices(
      [0, 1, 2, 3, 4, 5].map((i) => ({ ...big(i), resource })),
      pause,
    );
    expect(pauses).toBeGreaterThan(0);
    expect(new Set(out.map((o) => o.resource)).size).toBe(1);
  });
});

describe('free text', () => {
  const r = compileRedaction({});

  it.each([
    ['GET /v1?api_key=abc123&page=2 failed', 'GET /v1?api_key=[REDACTED]&page=2 failed'],
    ['Authorization: Bearer eyJhbGciOi.xyz', 'Authorization: [REDACTED]'],
    ["{'token': 'abc', 'n': 1} refused", "{'token': '[REDACTED]', 'n': 1} refused"],
    ['error: "password=p4ss:word" wrong', 'error: "password=[REDACTED]" wrong'],
    ['db_password = s3cr3t; retry', 'db_password = [REDACTED]; retry'],
    ['max_tokens=512 input_tokens: 12', 'max_tokens=512 input_tokens: 12'],
    ['plain message without pairs', 'plain message without pairs'],
    ['token=a:b token=c d', 'token=[REDACTED] token=[REDACTED] d'],
    ['password=a:password=b:c, n=1', 'password=[REDACTED], n=1'],
    ['x password=a:api_key="q r" z', 'x password=[REDACTED]"[REDACTED]" z'],
  ])('%s → %s', (text, expected) => {
    expect(r.redactText(text)).toBe(expected);
  });

  it('stays linear when secret pairs repeat inside one bare value (each used to rescan the rest)', () => {
    const text = 'password=a:'.repeat(6_000); // 64 KiB: 4.7 s before
    const started = performance.now();
    expect(r.redactText(text)).toBe(`password=${REDACTED}`);
    expect(r.redactText(`${text} n=1`)).toBe(`password=${REDACTED} n=1`);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('stays linear on a huge key of capitals in free text and in JSON', () => {
    const key = 'TOKEN'.repeat(13_000); // 64 KiB: about 20 s before, in the key's word form
    const started = performance.now();
    // Compared as booleans: a failure must not print 64 KiB.
    const text = `${key}=abc, ${key}_TOKEN=def`;
    expect(r.redactText(text) === `${key}=abc, ${key}_TOKEN=${REDACTED}`).toBe(true);
    const json = { [key]: 'v', [`${key}_TOKEN`]: { a: 1 } };
    const out = r.redactJson(json) as Record<string, unknown>;
    expect(out[key] === 'v' && out[`${key}_TOKEN`] === REDACTED).toBe(true);
    const inString = r.redactText(JSON.stringify({ [`${key}_TOKEN`]: 'abc' }));
    expect(inString === JSON.stringify({ [`${key}_TOKEN`]: REDACTED })).toBe(true);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('reads each pair once: text made of pairs (`password=password=…`) costs linear time', () => {
    const text = 'password='.repeat(1 << 17); // 1.2 MB; read again per pair, ~10^11 steps
    const started = process.cpuUsage();
    expect(r.redactText(text)).toBe(`password=${REDACTED}`);
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1000).toBeLessThan(5_000);
  });

  it('redacts JSON text as JSON', () => {
    expect(JSON.parse(r.redactText('{"client_secret":"s","id":7}'))).toEqual({
      client_secret: REDACTED,
      id: 7,
    });
  });
});

describe('labels', () => {
  it('replace a redacted key’s value and apply the value rules to the others', () => {
    const r = compileRedaction({ pii: ['email'], keys: ['*_pin'] });
    const labels = {
      team: 'search',
      owner: 'ana@example.com',
      card_pin: '1234',
      session_token: 'x',
    };
    expect(r.redactLabels(labels)).toEqual({
      team: 'search',
      owner: REDACTED,
      card_pin: REDACTED,
      session_token: REDACTED,
    });
    const clean = { team: 'search' };
    expect(r.redactLabels(clean)).toBe(clean);
  });
});

describe('record JSON', () => {
  it('redacts metadata keys and values at any depth and keeps the shape', () => {
    const r = compileRedaction({ pii: ['us-ssn'] });
    const record = {
      input: 'my ssn is 123-45-6789',
      metadata: { customer: { ssn_hint: 'ends 6789', refresh_token: 'rt' }, tries: 2 },
      labels: { env: 'prod' },
      trajectory: [{ type: 'tool', spanId: '00f067aa0ba902b7', input: '{"secret":"s"}' }],
    };
    expect(r.redactJson(record)).toEqual({
      input: 'my ssn is [REDACTED]',
      metadata: { customer: { ssn_hint: 'ends 6789', refresh_token: REDACTED }, tries: 2 },
      labels: { env: 'prod' },
      trajectory: [{ type: 'tool', spanId: '00f067aa0ba902b7', input: '{"secret":"[REDACTED]"}' }],
    });
  });

  it('returns undefined for top-level bytes and keeps primitives', () => {
    const r = compileRedaction({});
    expect(r.redactJson(new Uint8Array([1]))).toBeUndefined();
    expect(r.redactJson(null)).toBeNull();
    expect(r.redactJson(3)).toBe(3);
  });
});
