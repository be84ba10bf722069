import { describe, expect, it } from 'vitest';
import { SECRET_DETECTOR_NAMES } from '../config/index.js';
import { isTouchstoneError } from '../core/index.js';
import { compileRedaction, REDACTED, SECRET_DETECTORS, type SecretDetector } from './index.js';
import { TOKEN_RULES } from './secret-tokens.js';
import { compileSecrets } from './secrets.js';

/** `text` as a string attribute, with only `detector` on (no PII, no patterns). */
function redactWith(detector: SecretDetector, text: string): string {
  const redactor = compileRedaction({
    secrets: { disabled: SECRET_DETECTORS.filter((d) => d !== detector) },
  });
  return redactor.redactAttributes({ v: text }).v as string;
}

const JWT =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';
const AWS_SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const GHP = 'ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789';

/** detector, input, expected output: the secret replaced, everything around it kept. */
const POSITIVES: [SecretDetector, string, string][] = [
  // http-auth
  [
    'http-auth',
    'curl -H "Authorization: Bearer abc123.def456" https://api.example.com/v1',
    'curl -H "Authorization: Bearer [REDACTED]" https://api.example.com/v1',
  ],
  [
    'http-auth',
    "curl -H 'authorization: token 0123456789abcdef' https://x.example.com",
    "curl -H 'authorization: token [REDACTED]' https://x.example.com",
  ],
  [
    'http-auth',
    'GET /v1 HTTP/1.1\r\nHost: api\r\nAuthorization: Basic dXNlcjpwYXNzd29yZA==\r\nAccept: */*',
    'GET /v1 HTTP/1.1\r\nHost: api\r\nAuthorization: Basic [REDACTED]\r\nAccept: */*',
  ],
  [
    'http-auth',
    'Proxy-Authorization: Digest username="bob", realm="x", response="6629fae49393a053"\nnext',
    'Proxy-Authorization: Digest [REDACTED]\nnext',
  ],
  [
    'http-auth',
    'headers={"Authorization": "Bearer abc-123", "Accept": "application/json"}',
    'headers={"Authorization": "Bearer [REDACTED]", "Accept": "application/json"}',
  ],
  [
    'http-auth',
    'Authorization: AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, Signature=fe5f80f7',
    'Authorization: AWS4-HMAC-SHA256 [REDACTED]',
  ],
  ['http-auth', 'authorization: 9f8e7d6c5b4a3210', 'authorization: [REDACTED]'],
  [
    'http-auth',
    'retrying request with Bearer Zm9vYmFyMTIz.c2lnbmF0dXJl after 401',
    'retrying request with Bearer [REDACTED] after 401',
  ],
  ['http-auth', 'BEARER ABCDEF123456', 'BEARER [REDACTED]'],
  ['http-auth', 'sent Basic dXNlcjpwYXNzd29yZA==.', 'sent Basic [REDACTED].'],
  [
    'http-auth',
    'curl -u admin:s3cr3t https://x.example.com/api',
    'curl -u admin:[REDACTED] https://x.example.com/api',
  ],
  [
    'http-auth',
    'curl -sS --user "deploy:p@ss w0rd" https://x.example.com',
    'curl -sS --user "deploy:[REDACTED]" https://x.example.com',
  ],
  ['http-auth', 'curl --user=bob:pw https://x', 'curl --user=bob:[REDACTED] https://x'],
  // password
  ['password', 'password=hunter2&user=bob', 'password=[REDACTED]&user=bob'],
  [
    'password',
    'jdbc:postgresql://db/orders?user=app&password=s3cret&ssl=true',
    'jdbc:postgresql://db/orders?user=app&password=[REDACTED]&ssl=true',
  ],
  [
    'password',
    'host=db port=5432 user=app password=s3cret sslmode=require',
    'host=db port=5432 user=app password=[REDACTED] sslmode=require',
  ],
  [
    'password',
    'Server=tcp:db,1433;User ID=sa;Password=Sup3r!;Encrypt=True',
    'Server=tcp:db,1433;User ID=sa;Password=[REDACTED];Encrypt=True',
  ],
  ['password', 'Driver={SQL};UID=sa;PWD={p;ss};', 'Driver={SQL};UID=sa;PWD=[REDACTED];'],
  ['password', 'export PGPASSWORD=s3cret', 'export PGPASSWORD=[REDACTED]'],
  ['password', 'MYSQL_ROOT_PASSWORD=s3cret docker up', 'MYSQL_ROOT_PASSWORD=[REDACTED] docker up'],
  [
    'password',
    'config = {"db_password": "s3cret", "pool": 5',
    'config = {"db_password": "[REDACTED]", "pool": 5',
  ],
  ['password', "kwargs: {'password': 'hunter2'}", "kwargs: {'password': '[REDACTED]'}"],
  [
    'password',
    'database:\n  user: app\n  password: s3cret phrase\n  host: db',
    'database:\n  user: app\n  password: [REDACTED]\n  host: db',
  ],
  [
    'password',
    '[client]\npassword = s3cret\nhost = db',
    '[client]\npassword = [REDACTED]\nhost = db',
  ],
  ['password', 'mysql --password s3cret -h db', 'mysql --password [REDACTED] -h db'],
  [
    'password',
    'manage.py createsuperuser --password=s3cret',
    'manage.py createsuperuser --password=[REDACTED]',
  ],
  ['password', 'set passphrase: "correct horse"', 'set passphrase: "[REDACTED]"'],
  ['password', 'ssl_passphrase=abc123', 'ssl_passphrase=[REDACTED]'],
  ['password', 'login password:hunter2 failed', 'login password:[REDACTED] failed'],
  ['password', 'db.password = "s3cret"', 'db.password = "[REDACTED]"'],
  // url-userinfo
  [
    'url-userinfo',
    'OperationalError: could not connect to postgres://app:Hunter2@db.internal:5432/orders',
    'OperationalError: could not connect to postgres://app:[REDACTED]@db.internal:5432/orders',
  ],
  [
    'url-userinfo',
    'mongodb+srv://admin:p%40ss@cluster0.x.mongodb.net/?retryWrites=true',
    'mongodb+srv://admin:[REDACTED]@cluster0.x.mongodb.net/?retryWrites=true',
  ],
  ['url-userinfo', 'redis://:s3cret@cache:6379/0', 'redis://:[REDACTED]@cache:6379/0'],
  ['url-userinfo', 'https://user:p@ss@host/path', 'https://user:[REDACTED]@host/path'],
  [
    'url-userinfo',
    'git clone https://x-access-token:abc123@github.com/o/r.git',
    'git clone https://x-access-token:[REDACTED]@github.com/o/r.git',
  ],
  ['url-userinfo', 'dsn "postgres:\\/\\/u:pw@h\\/db"', 'dsn "postgres:\\/\\/u:[REDACTED]@h\\/db"'],
  // url-query
  [
    'url-query',
    'GET https://api.example.com/v1/search?q=paris&api_key=abc123&page=2',
    'GET https://api.example.com/v1/search?q=paris&api_key=[REDACTED]&page=2',
  ],
  [
    'url-query',
    'https://app.example.com/cb#access_token=abc.def&token_type=bearer',
    'https://app.example.com/cb#access_token=[REDACTED]&token_type=bearer',
  ],
  [
    'url-query',
    'https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F2026&X-Amz-Security-Token=FQoG&X-Amz-Signature=fe5f80f7',
    'https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[REDACTED]&X-Amz-Security-Token=[REDACTED]&X-Amz-Signature=[REDACTED]',
  ],
  [
    'url-query',
    'https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=abc%2Bdef%3D',
    'https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=[REDACTED]',
  ],
  [
    'url-query',
    'https://storage.googleapis.com/b/o?X-Goog-Credential=sa%40p&X-Goog-Signature=0a1b',
    'https://storage.googleapis.com/b/o?X-Goog-Credential=[REDACTED]&X-Goog-Signature=[REDACTED]',
  ],
  [
    'url-query',
    'POST /oauth/token grant_type=client_credentials&client_id=app&client_secret=xyz',
    'POST /oauth/token grant_type=client_credentials&client_id=app&client_secret=[REDACTED]',
  ],
  [
    'url-query',
    'see https://x.example.com/?token=abc)',
    'see https://x.example.com/?token=[REDACTED])',
  ],
  ['url-query', '"https://x/a?b=1\\u0026apikey=k1"', '"https://x/a?b=1\\u0026apikey=[REDACTED]"'],
  // private-key
  [
    'private-key',
    'key: -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nZm9vYmFy\n-----END RSA PRIVATE KEY-----\nbye',
    'key: -----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n-----END RSA PRIVATE KEY-----\nbye',
  ],
  [
    'private-key',
    'Here it is:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\nUse it wisely.',
    'Here it is:\n-----BEGIN OPENSSH PRIVATE KEY-----\n[REDACTED]\n-----END OPENSSH PRIVATE KEY-----\nUse it wisely.',
  ],
  [
    'private-key',
    '-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----',
    '-----BEGIN EC PRIVATE KEY-----\n[REDACTED]\n-----END EC PRIVATE KEY-----',
  ],
  [
    'private-key',
    '-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJ\n-----END ENCRYPTED PRIVATE KEY-----',
    '-----BEGIN ENCRYPTED PRIVATE KEY-----\n[REDACTED]\n-----END ENCRYPTED PRIVATE KEY-----',
  ],
  [
    'private-key',
    '-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----',
    '-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n[REDACTED]\n-----END PGP PRIVATE KEY BLOCK-----',
  ],
  [
    'private-key',
    '"private": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg…[truncated 2048 bytes]',
    '"private": "-----BEGIN PRIVATE KEY-----[REDACTED]',
  ],
  // jwt
  ['jwt', `session ${JWT} expired`, 'session [REDACTED] expired'],
  ['jwt', `Authorization: Bearer ${JWT}`, 'Authorization: Bearer [REDACTED]'],
  ['jwt', 'unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. here', 'unsigned [REDACTED] here'],
  // aws
  ['aws', 'key id AKIAIOSFODNN7EXAMPLE in use', 'key id AKIA[REDACTED] in use'],
  ['aws', 'ASIAY34FZKBOKMUTVV7A,', 'ASIA[REDACTED],'],
  [
    'aws',
    `[default]\naws_secret_access_key = ${AWS_SECRET}\nregion = eu-west-1`,
    '[default]\naws_secret_access_key = [REDACTED]\nregion = eu-west-1',
  ],
  [
    'aws',
    `creds: {"SecretAccessKey": "${AWS_SECRET}",`,
    'creds: {"SecretAccessKey": "[REDACTED]",',
  ],
  ['aws', `AWS_SECRET_ACCESS_KEY=${AWS_SECRET} ./run`, 'AWS_SECRET_ACCESS_KEY=[REDACTED] ./run'],
  [
    'aws',
    `AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEJr${'A'.repeat(60)}== next`,
    'AWS_SESSION_TOKEN=[REDACTED] next',
  ],
  // vendor tokens
  ['github', `GITHUB_TOKEN=${GHP}`, 'GITHUB_TOKEN=ghp_[REDACTED]'],
  ['github', `token gho_${'a1B2'.repeat(9)}.`, 'token gho_[REDACTED].'],
  [
    'github',
    'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456',
    'github_pat_[REDACTED]',
  ],
  ['gitlab', 'PRIVATE-TOKEN: glpat-xxxxxxxxxx1234567890', 'PRIVATE-TOKEN: glpat-[REDACTED]'],
  [
    'slack',
    'SLACK_BOT_TOKEN=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx',
    'SLACK_BOT_TOKEN=xoxb-[REDACTED]',
  ],
  ['slack', 'xapp-1-A0123456789-1234567890123-abcdef', 'xapp-[REDACTED]'],
  [
    'slack',
    'POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX failed',
    'POST https://hooks.slack.com/services/[REDACTED] failed',
  ],
  [
    'stripe',
    'stripe.api_key = "sk_live_51H8abcdefghijKLMNOP"',
    'stripe.api_key = "sk_live_[REDACTED]"',
  ],
  [
    'stripe',
    'rk_test_abcdefghijklmnop1234 and whsec_0123456789abcdefABCDEF',
    'rk_test_[REDACTED] and whsec_[REDACTED]',
  ],
  [
    'llm-api-key',
    'OPENAI_API_KEY=sk-proj-AbCdEf1234567890GhIjKlMnOpQrStUvWx_yz-0123',
    'OPENAI_API_KEY=sk-[REDACTED]',
  ],
  [
    'llm-api-key',
    'client = Anthropic(api_key="sk-ant-api03-AbCdEfGh1234567890ijKLmnopQRstuv-xyzAA")',
    'client = Anthropic(api_key="sk-[REDACTED]")',
  ],
  ['llm-api-key', 'key sk-0123456789abcdef0123456789abcdef', 'key sk-[REDACTED]'],
  [
    'google-api-key',
    'https://maps.googleapis.com/maps/api/geocode/json?key=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe',
    'https://maps.googleapis.com/maps/api/geocode/json?key=AIza[REDACTED]',
  ],
];

/** Look-alikes each detector must leave as they are. */
const NEGATIVES: [SecretDetector, string][] = [
  ['http-auth', 'Use a Bearer token for requests.'],
  ['http-auth', 'Basic usage: run the tool with --help'],
  ['http-auth', 'Basic information about the trip'],
  ['http-auth', 'the bearer of this letter'],
  ['http-auth', 'docker run -u 1000:1000 app'],
  ['http-auth', 'ps -u root:wheel'],
  ['http-auth', 'token_type: bearer'],
  ['http-auth', 'The Authorization header is required'],
  ['http-auth', 'authorization_url: https://auth.example.com/authorize'],
  ['http-auth', 'curl --username bob:x https://x'],
  ['password', 'passwordless login is enabled'],
  ['password', 'Reset your password: click the link below'],
  ['password', 'password_policy=strict'],
  ['password', 'the password = get_password() call'],
  ['password', 'PWD=/home/ann OLDPWD=/tmp'],
  ['password', 'password='],
  ['password', '"password": null'],
  ['password', 'password_hint: your first pet'],
  ['password', 'bypass=true compass=north passenger=2'],
  ['password', 'my password is long'],
  ['url-userinfo', 'https://example.com/path?q=1'],
  ['url-userinfo', 'https://user@host/x'],
  ['url-userinfo', 'http://host:8080/x'],
  ['url-userinfo', 'mailto:bob@example.com'],
  ['url-userinfo', 'ssh://git@github.com/o/r'],
  ['url-userinfo', 'http://[::1]:8080/'],
  ['url-userinfo', 'at 10:30://'],
  ['url-query', 'https://x.example.com/?page=2&sort=desc'],
  ['url-query', 'https://x.example.com/?key=value&monkey=1'],
  ['url-query', 'https://x.example.com/?tokens=5&max_tokens=100&signature_version=4'],
  ['url-query', 'token=abc is not in a URL'],
  ['url-query', 'https://x.example.com/?token='],
  ['private-key', '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmg\n-----END CERTIFICATE-----'],
  ['private-key', '-----BEGIN PUBLIC KEY-----\nMFkwEwYH\n-----END PUBLIC KEY-----'],
  ['private-key', '-----BEGIN-----BEGIN PRIVATE KEY'],
  ['jwt', 'eyJzdWIiOiIxIn0.eyJzdWIiOiIxIn0.c2ln'],
  ['jwt', 'eyJhbGciOiJIUzI1NiJ9'],
  ['jwt', 'data:image/png;base64,iVBORw0KGgoeyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln'],
  ['aws', 'AKIAIOSFODNN7EXAMPLEX'],
  ['aws', 'MYAKIAIOSFODNN7EXAMPLE'],
  ['aws', 'ASIA PACIFIC and Asia'],
  ['aws', 'ASIAPACIFICREGIONAL'],
  ['aws', 'aws_secret_access_key_sha = 4bf92f3577b34da6a3ce929d0e0e47364bf92f35'],
  ['aws', 'aws_secret_key = 4bf92f3577b34da6a3ce929d0e0e47364bf92f35'],
  ['aws', `checksum = ${AWS_SECRET}`],
  ['github', 'ghp_short and myghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789'],
  ['gitlab', 'glpat-short'],
  ['slack', 'xoxo-see-you-next-summer and xoxb-nodigitsatallhere'],
  ['slack', 'https://slack.com/services/T0/B0/X and https://hooks.slack.com/'],
  ['stripe', 'pk_live_51H8abcdefghijKLMNOP and desk_live_abcdefghijklmnop1234'],
  ['llm-api-key', 'risk-free ask-me-anything task-1234567890-abcdefghij'],
  ['llm-api-key', 'sk-learn sk-this-is-not-a-real-key-at-all sk-internationalization-localization'],
  ['llm-api-key', 'desk-0123456789abcdef0123456789abcdef'],
  ['google-api-key', 'AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGew'],
  ['google-api-key', 'XAIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe'],
];

describe('secret detectors', () => {
  it.each(POSITIVES)('%s: %j', (detector, text, expected) => {
    expect(redactWith(detector, text)).toBe(expected);
  });

  it.each(NEGATIVES)('%s keeps %j', (detector, text) => {
    expect(redactWith(detector, text)).toBe(text);
  });

  it('covers every detector with cases both ways', () => {
    for (const d of SECRET_DETECTORS) {
      expect(
        POSITIVES.some(([p]) => p === d),
        d,
      ).toBe(true);
      expect(
        NEGATIVES.some(([n]) => n === d),
        d,
      ).toBe(true);
    }
  });

  it('find nothing in the negatives with every detector on (no detector trips on another’s)', () => {
    const all = compileRedaction({});
    for (const [, text] of NEGATIVES) {
      if (text.includes('curl --username') || text.includes('ssh://')) continue;
      expect(all.redactAttributes({ v: text }).v, text).toBe(text);
    }
  });
});

describe('loose scans (the gate for plain strings and JSON text)', () => {
  const scanner = compileSecrets([...SECRET_DETECTORS])!;

  it('say yes wherever a strict scan finds a secret, also inside JSON text, once or twice escaped', () => {
    for (const [, text] of POSITIVES) {
      const ranges: number[] = [];
      scanner.scan(text, ranges);
      expect(ranges.length, text).toBeGreaterThan(0);
      expect(scanner.worth(text), text).toBe(true);
      const once = JSON.stringify({ message: text });
      expect(scanner.worth(once), once).toBe(true);
      const twice = JSON.stringify({ body: once });
      expect(scanner.worth(twice), twice).toBe(true);
    }
  });

  it('say yes on random strings whenever a strict scan finds something', () => {
    const alphabet = [
      '=',
      ':',
      ' ',
      '"',
      '\n',
      'a',
      'Z',
      '9',
      '/',
      '@',
      'sk-',
      'password',
      'Bearer ',
      'AKIA',
      '-----BEGIN PRIVATE KEY-----',
      'eyJhbGciOiJub25lIn0',
      '.',
      '?token',
      '&',
      '://',
      'u:p@h',
      'aws_secret_key',
      AWS_SECRET,
      GHP,
      'curl -u ',
      'x:y',
    ];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let found = 0;
    for (let n = 0; n < 3000; n++) {
      let text = '';
      const parts = 1 + Math.floor(random() * 12);
      for (let k = 0; k < parts; k++) text += alphabet[Math.floor(random() * alphabet.length)];
      const ranges: number[] = [];
      scanner.scan(text, ranges);
      if (ranges.length > 0) {
        found++;
        expect(scanner.worth(text), text).toBe(true);
      }
    }
    expect(found).toBeGreaterThan(300);
  });

  it('keep JSON message bodies without secrets from being parsed', () => {
    const body = JSON.stringify([
      { role: 'system', content: 'You are a travel assistant: answer in 24-hour times.' },
      { role: 'user', content: 'Fly BER→CDG on 2026-11-21 at 07:15, booking ORD-4000-1000.' },
      {
        role: 'tool',
        content: '{"from":"BER","to":"CDG","url":"https://api.example.com/v1?page=2"}',
      },
    ]);
    expect(scanner.worth(body)).toBe(false);
  });
});

describe('scanning cost', () => {
  /** CPU milliseconds of the fastest of three scans of `text`. */
  function scanMs(text: string): number {
    const scanner = compileSecrets([...SECRET_DETECTORS])!;
    let best = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) {
      const started = process.cpuUsage();
      scanner.scan(text, []);
      scanner.worth(text);
      const used = process.cpuUsage(started);
      best = Math.min(best, (used.user + used.system) / 1000);
    }
    return best;
  }

  it.each([
    ['Bearer ', 'Bearer '],
    ['=', '='],
    ['password=', 'password= '],
    ['-----BEGIN', '-----BEGIN PRIVATE KEY-----'],
    ['eyJ.', 'eyJhbGciOiJub25lIn0.'],
    ['sk-', 'sk-'],
    ['://', 'a://b:c'],
    ['?token=', '&token=a'],
    ['curl -u', 'curl -u a:b '],
    ['aws', 'aws_secret_key=A'],
    ['Authorization: a', 'Authorization: a '],
    ['Authorization: "a', 'Authorization: "a '],
    ['password={', 'password={'],
    ['Basic', 'Basic dXNlcjpwYXNz '],
    ['glued tokens', 'xghp_xsk-xAKIAxeyJ'],
  ])('grows linearly with the text (%s repeated)', (_, unit) => {
    const small = unit.repeat(Math.ceil(64_000 / unit.length));
    const large = unit.repeat(Math.ceil(512_000 / unit.length));
    scanMs(small); // warm up
    const ratio = scanMs(large) / Math.max(scanMs(small), 0.5);
    // 8× the text: linear costs about 8×, quadratic 64×.
    expect(ratio).toBeLessThan(24);
  });
});

describe('traces.redaction.secrets', () => {
  const text = `key ${GHP} and ${JWT}`;

  it('is on by default: every detector', () => {
    expect(compileRedaction({}).redactText(text)).toBe(`key ghp_${REDACTED} and ${REDACTED}`);
  });

  it('false turns every detector off', () => {
    const redactor = compileRedaction({ secrets: false });
    expect(redactor.enabled).toBe(true);
    expect(redactor.redactText(text)).toBe(text);
  });

  it('{disabled: [...]} turns the named ones off', () => {
    const redactor = compileRedaction({ secrets: { disabled: ['jwt'] } });
    expect(redactor.redactText(text)).toBe(`key ghp_${REDACTED} and ${JWT}`);
  });

  it('refuses unknown detector names by their config path', () => {
    let err: unknown;
    try {
      compileRedaction({ secrets: { disabled: ['jwt', 'hunter2-detector'] } });
    } catch (e) {
      err = e;
    }
    expect(isTouchstoneError(err) && err.code).toBe('REDACTION_RULE_INVALID');
    if (!isTouchstoneError(err)) return;
    expect(err.details).toEqual([
      {
        path: 'traces.redaction.secrets.disabled[1]',
        message: expect.stringContaining('unknown secret detector'),
      },
    ]);
    expect(JSON.stringify({ m: err.message, d: err.details })).not.toContain('hunter2');
  });

  it('names the same detectors as the config schema', () => {
    expect([...SECRET_DETECTOR_NAMES]).toEqual([...SECRET_DETECTORS]);
  });

  it('anchors no rule on a prefix of another rule’s anchor (the anchor pattern relies on it)', () => {
    const anchors = Object.values(TOKEN_RULES).flatMap((rules) => rules.flatMap((r) => r.anchors));
    anchors.push('=', ':');
    for (const a of anchors) {
      for (const b of anchors) if (a !== b) expect(b.startsWith(a), `${a} / ${b}`).toBe(false);
    }
  });
});
