/**
 * Redaction corpus: secrets and PII planted in every position redaction covers must all be gone
 * from the output (searched in its JSON serialization, bytes shown as text), ids must be
 * unchanged, bytes dropped; and a list of look-alikes (token counts, timestamps, ids, versions,
 * dates, mistyped cards, hashes, words that contain `sk-` or `password` …) placed in the same
 * positions must come out verbatim. Credentials in free text (curl commands, DSNs in stack traces,
 * headers in log lines, PEM keys, vendor tokens) are caught by the secret detectors, on by default.
 */
import { describe, expect, it } from 'vitest';
import type { Attributes, Span } from '../core/index.js';
import { luhn } from './card.js';
import { compileRedaction } from './index.js';

const redactor = compileRedaction({
  keys: ['*_pin', 'session_cookie*'],
  patterns: ['sk-[A-Za-z0-9]{16,}'],
  pii: ['email', 'us-ssn', 'credit-card', 'phone'],
});

/** Every planted secret; the test fails if any survives. */
const planted: string[] = [];
let n = 0;

function plant(value: string): string {
  planted.push(value);
  return value;
}

/** A value only a key rule can catch. */
const keySecret = () => plant(`KEYSENTINEL${++n}x`);
const email = () => plant(`sentinel.${++n}@example.com`);
const ssn = () => {
  n++;
  return plant(
    `${String(100 + (n % 500)).padStart(3, '0')}-${String(10 + (n % 89))}-${String(1000 + n)}`,
  );
};
function cardDigits(): string {
  const body = `4539${String(++n).padStart(11, '0')}`;
  for (let check = 0; check < 10; check++) if (luhn(body + check)) return body + check;
  throw new Error('unreachable');
}
const card = (format: 'plain' | 'spaced' | 'dashed' = 'plain') => {
  const d = cardDigits();
  const sep = format === 'spaced' ? ' ' : format === 'dashed' ? '-' : '';
  return plant(d.match(/.{4}/g)!.join(sep));
};
const phone = (style: 'nanp' | 'e164' = 'nanp') => {
  n++;
  return plant(style === 'nanp' ? `(415) 555-${1000 + n}` : `+44 20 7946 ${1000 + n}`);
};
const apiKey = () => plant(`sk-SENTINEL${++n}abcdefghijklmnop`);

/** `length` letters and digits of both cases, unique per call (key material the way vendors mint it). */
function material(length: number): string {
  const id = `K${++n}`;
  const fill = 'q7Lm4Xw9Rt2Kp8Vb3Nc6Hd5Jf1Gs0Zy';
  let out = id;
  while (out.length < length) out += fill;
  return out.slice(0, length);
}
const secret = (length = 24) => plant(material(length));
const upperMaterial = (length: number) => plant(material(length).toUpperCase());
const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const jwt = () =>
  plant(
    `${base64url({ alg: 'HS256', typ: 'JWT' })}.${base64url({ sub: `user-${++n}`, exp: 1763712000 })}.${material(43)}`,
  );

/** Credentials in free text, each where agents and their tools put them. */
function credentialsInText(): Attributes {
  const basic = plant(Buffer.from(`deploy:${material(12)}`).toString('base64'));
  return {
    'tool.arguments': JSON.stringify({
      command: `curl -sS -H "Authorization: Bearer ${secret()}" -u deploy:${secret(12)} "https://api.example.com/v1/items?api_key=${secret()}&page=2"`,
    }),
    'gen_ai.output.messages': JSON.stringify([
      {
        role: 'assistant',
        tool_calls: [
          {
            id: `call_${n}`,
            function: {
              name: 'shell',
              arguments: JSON.stringify({
                cmd: `curl -H 'Authorization: token ${secret()}' https://x.example.com`,
              }),
            },
          },
        ],
      },
    ]),
    'exception.stacktrace': `Traceback (most recent call last):\n  File "/app/db.py", line 12, in connect\npsycopg2.OperationalError: could not connect to server: dsn=postgresql://app:${secret(14)}@db.internal:5432/orders\n`,
    'log.record': `2026-11-21T10:30:00Z INFO POST /v1/charges Authorization: Basic ${basic} took 120ms; retried with Bearer ${jwt()}`,
    'llm.message': `Here is the deploy key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n${secret(60)}\n${secret(60)}\n-----END OPENSSH PRIVATE KEY-----\nKeep it safe.`,
    'http.url': `https://api.example.com/v1/search?q=paris&api_key=${secret()}&page=2`,
    'url.full': `https://bucket.s3.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA${upperMaterial(16)}%2F20261121%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=${secret(64)}`,
    'config.dump': `[default]\naws_access_key_id = AKIA${upperMaterial(16)}\naws_secret_access_key = ${secret(40)}\n\ndatabase:\n  password: ${secret(10)}\njdbc:sqlserver://db;user=sa;password=${secret(10)};encrypt=true`,
    'git.remote': `https://x-access-token:ghs_${secret(36)}@github.com/acme/app.git`,
    'env.dump': `GITHUB_TOKEN=ghp_${secret(36)} GITLAB_TOKEN=glpat-${secret(20)} SLACK_BOT_TOKEN=xoxb-1234-${secret(24)} STRIPE_KEY=sk_live_${secret(24)} OPENAI_API_KEY=sk-proj-${secret(48)} ANTHROPIC_API_KEY=sk-ant-api03-${secret(90)}`,
    'notify.webhook': `POST https://hooks.slack.com/services/${secret(30)} failed with 404`,
    'maps.request': `GET https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=AIza${secret(35)}`,
    'tool.output': `{"db": {"host": "db", "password": "${secret(12)}", "note": "cut…[truncated 4096 bytes]`,
  };
}

/** Free text holding one of each value sentinel. */
const text = () =>
  `mail ${email()}, ssn ${ssn()}, card ${card('spaced')}, call ${phone()} or ${phone('e164')}, key ${apiKey()}.`;

/** Attributes with a sentinel in every kind of slot. */
function secretAttributes(withBytes = true): Attributes {
  const attributes: Attributes = {
    password: keySecret(),
    passwd: keySecret(),
    'http.request.header.authorization': [`Bearer ${keySecret()}`],
    'http.request.header.x-api-key': [keySecret()],
    'http.request.header.cookie': [keySecret()],
    'http.response.header.set-cookie': [keySecret()],
    token: keySecret(),
    secret: keySecret(),
    api_key: keySecret(),
    'api-key': keySecret(),
    apikey: keySecret(),
    private_key: keySecret(),
    'oauth.access_token': keySecret(),
    'app.client_secret': keySecret(),
    DB_PASSWORD: keySecret(),
    openai_api_key: keySecret(),
    accessToken: keySecret(),
    'card.atm_pin': keySecret(),
    session_cookie_v2: keySecret(),
    'user.email': email(),
    'user.ssn_text': `ssn: ${ssn()}`,
    'payment.pan': card(),
    'payment.pan_dashed': card('dashed'),
    'payment.pan_number': Number(plant(cardDigits())),
    'contact.phone': phone(),
    'contact.phone_intl': phone('e164'),
    'llm.note': text(),
    list: [email(), `x ${apiKey()}`, [phone(), { deep: ssn() }]],
    kv: {
      level1: { level2: { password: keySecret(), note: text() } },
      arr: [{ token: keySecret() }],
    },
    'gen_ai.input.messages': JSON.stringify([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: text() },
      { role: 'tool', metadata: { api_key: keySecret(), Authorization: keySecret() } },
    ]),
    'input.value': JSON.stringify({
      payload: JSON.stringify({ secret: keySecret(), note: text() }),
      n: 1,
    }),
    'output.value': `{"result":"ok","api_key":"${keySecret()}","mail":"${email()}","cut":"…[truncated 120 bytes]`,
    ...credentialsInText(),
  };
  if (withBytes) {
    attributes.blob = new TextEncoder().encode(plant(`BYTESSENTINEL${++n}`));
    attributes.blobs = ['keep', new TextEncoder().encode(plant(`BYTESSENTINEL${++n}`))];
  }
  return attributes;
}

/** Look-alikes that must survive verbatim, by key. Keys are chosen to be ordinary too. */
const LOOK_ALIKES: Attributes = {
  'gen_ai.usage.input_tokens': 1234,
  'gen_ai.usage.output_tokens': 256,
  'llm.token_count.prompt': 1234,
  'gen_ai.request.max_tokens': 1024,
  max_tokens: 512,
  input_tokens: 77,
  tokenizer: 'cl100k_base',
  secretary_name: 'Ann Smith',
  password_policy: 'min 12 characters',
  authorization_url: 'https://auth.example.com/authorize',
  ms_timestamp: '1763712000001',
  ns_timestamp: '1763712000000000001',
  us_timestamp: '1763712000000005',
  ms_timestamp_number: 1763712000001,
  compact_time: '20261121103000',
  order_id: 'ORD-4111-1111',
  order_card_like: 'ORD-4111111111111111',
  long_run: `${'1'.repeat(49)}4111111111111111`,
  mistyped_card: '4111 1111 1111 1112',
  mistyped_card_plain: '4111111111111112',
  uuid: '123e4567-e89b-12d3-a456-426614174000',
  uuid_digits: '12345678-1234-1234-1234-123456789012',
  ipv4: '192.168.100.200',
  semver: '1.2.3',
  semver_build: '10.20.30-rc.1+build.20260101123456',
  date: '2026-11-21',
  datetime: '2026-11-21T10:30:00+01:00',
  isbn: '978-3-06-406156-9',
  isbn_plain: '9783064061569',
  trace_hex: '4bf92f3577b34da6a3ce929d0e0e4736',
  span_hex: '00f067aa0ba902b7',
  local_user: 'user@localhost',
  npm_spec: 'left-pad@1.3.0',
  price: 'total 1,234.56 EUR',
  invalid_nanp: '123-456-7890',
  invalid_ssn: '000-12-3456',
  prose: 'The tokenizer counts 1234 tokens; the secretary keeps the token count.',
  git_sha: '4bf92f3577b34da6a3ce929d0e0e47364bf92f35',
  sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  ipv6: '2001:db8::8a2e:370:7334',
  base64_image:
    'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  words:
    'A risk-free, ask-me-anything session on passwordless sign-in; the task-force bypasses the compass. Basic plan, Bearer bonds.',
  sk_words: 'sk-learn and desk-lamp-2024-edition and task-42-retry',
  usage_text: 'input_tokens=1234 max_tokens: 512 token_count=7',
  clean_url: 'https://api.example.com/v1/items?page=2&sort=asc&key=id',
  url_with_port: 'http://localhost:8080/healthz',
  shell_pwd: 'PWD=/home/ann/project',
  certificate: '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----',
  jwt_like: 'eyJzdWIiOiIxIn0.eyJzdWIiOiIxIn0.c2lnbmF0dXJl',
  region: 'ASIA PACIFIC (Tokyo), ap-northeast-1',
  request_id: 'req_8f2c4b1a9d7e6f5a3c2b1d0e',
  time_of_day: 'departs 07:15, arrives 08:55',
};
const LOOK_ALIKE_TEXT = Object.values(LOOK_ALIKES)
  .filter((v): v is string => typeof v === 'string')
  .join(' | ');

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const LINKED = '0af7651916cd43dd8448eb211c80319c';

function corpus(): { spans: Span[]; labels: Record<string, string>; record: unknown } {
  const resource = { 'service.name': 'agent', ...secretAttributes(), ...LOOK_ALIKES };
  const spans: Span[] = [0, 1, 2].map((i) => ({
    traceId: TRACE,
    spanId: `00f067aa0ba902b${i}`,
    parentSpanId: i === 0 ? '' : '00f067aa0ba902b0',
    name: `step ${i}`,
    kind: 1,
    startTimeUnixNano: '1763712000000000000',
    endTimeUnixNano: '1763712000500000000',
    attributes: { ...secretAttributes(), ...LOOK_ALIKES, look_alike_text: LOOK_ALIKE_TEXT },
    events: [
      { name: 'exception', timeUnixNano: '1763712000100000000', attributes: secretAttributes() },
      { name: 'look-alikes', timeUnixNano: '1763712000200000000', attributes: { ...LOOK_ALIKES } },
    ],
    links: [{ traceId: LINKED, spanId: 'b7ad6b7169203331', attributes: secretAttributes() }],
    status: {
      code: 2,
      message: `failed: password=${keySecret()} Authorization: Bearer ${keySecret()} ${text()} retried with Bearer ${secret(32)} at postgres://app:${secret(12)}@db/x | ${LOOK_ALIKE_TEXT}`,
    },
    resource,
    scope: { name: 'scope', version: '1.0.0' },
  }));
  const labels = {
    team: 'search',
    owner: email(),
    session_token: keySecret(),
    note: text(),
    ...Object.fromEntries(
      Object.entries(LOOK_ALIKES).filter((e): e is [string, string] => typeof e[1] === 'string'),
    ),
  };
  const record = {
    input: text(),
    output: { answer: text(), citations: [email()] },
    metadata: { ...secretAttributes(), ...LOOK_ALIKES, nested: { deeper: secretAttributes() } },
    trajectory: [
      { type: 'tool', spanId: '00f067aa0ba902b1', input: JSON.stringify(secretAttributes(false)) },
    ],
  };
  return { spans, labels, record };
}

/** JSON with bytes shown as their text, so planted bytes would be found if kept. */
function serialize(value: unknown): string {
  return JSON.stringify(value, (_, v) =>
    v instanceof Uint8Array ? `BYTES(${new TextDecoder().decode(v)})` : v,
  );
}

function hasBytes(value: unknown): boolean {
  if (value instanceof Uint8Array) return true;
  if (Array.isArray(value)) return value.some(hasBytes);
  if (value !== null && typeof value === 'object') return Object.values(value).some(hasBytes);
  return false;
}

describe('redaction corpus', () => {
  const input = corpus();
  const inputText = serialize(input);
  const spans = redactor.redactSpans(input.spans);
  const labels = redactor.redactLabels(input.labels);
  const record = redactor.redactJson(input.record);
  const output = serialize({ spans, labels, record });

  it('plants every sentinel in the input (the test can fail)', () => {
    expect(planted.length).toBeGreaterThan(500);
    for (const sentinel of planted) expect(inputText).toContain(sentinel);
  });

  it('replaces 100% of the planted secrets and PII', () => {
    const survivors = [...new Set(planted)].filter((s) => output.includes(s));
    expect(survivors).toEqual([]);
    expect(output).toContain('[REDACTED]');
  });

  it('drops bytes values everywhere', () => {
    expect(hasBytes(input)).toBe(true);
    expect(hasBytes({ spans, labels, record })).toBe(false);
    expect(output).not.toContain('BYTES(');
  });

  it('keeps trace, span, parent and link ids, names, times and scope', () => {
    spans.forEach((span, i) => {
      const before = input.spans[i]!;
      expect(span.traceId).toBe(TRACE);
      expect([span.spanId, span.parentSpanId, span.name]).toEqual([
        before.spanId,
        before.parentSpanId,
        before.name,
      ]);
      expect([span.startTimeUnixNano, span.endTimeUnixNano]).toEqual([
        before.startTimeUnixNano,
        before.endTimeUnixNano,
      ]);
      expect(span.links[0]).toMatchObject({ traceId: LINKED, spanId: 'b7ad6b7169203331' });
      expect(span.events.map((e) => e.name)).toEqual(['exception', 'look-alikes']);
      expect(span.scope).toEqual(before.scope);
    });
  });

  it('shares one redacted resource between the spans of one resource', () => {
    expect(spans[1]!.resource).toBe(spans[0]!.resource);
    expect(spans[2]!.resource).toBe(spans[0]!.resource);
  });

  it('keeps every look-alike verbatim in every position (no false positives)', () => {
    const positions: [string, Attributes | Record<string, unknown>][] = [];
    for (const span of spans) {
      positions.push(['resource', span.resource], ['span', span.attributes]);
      positions.push(['event', span.events[1]!.attributes]);
    }
    positions.push(
      ['labels', labels],
      ['record metadata', (record as { metadata: Attributes }).metadata],
    );
    for (const [where, attributes] of positions) {
      for (const [key, value] of Object.entries(LOOK_ALIKES)) {
        if (where === 'labels' && typeof value !== 'string') continue;
        expect(attributes[key], `${where}: ${key}`).toEqual(value);
      }
    }
    expect(spans[0]!.attributes.look_alike_text).toBe(LOOK_ALIKE_TEXT);
    for (const span of spans) expect(span.status.message.endsWith(LOOK_ALIKE_TEXT)).toBe(true);
  });

  it('leaves the input untouched', () => {
    expect(serialize(input)).toBe(inputText);
  });
});
