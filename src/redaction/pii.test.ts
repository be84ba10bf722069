import RE2 from 're2';
import { describe, expect, it } from 'vitest';
import {
  type Finder,
  findCard,
  findE164,
  findEmail,
  findNanp,
  findSsn,
  matchEnd,
  type PiiDetector,
  tokenDigits,
} from './pii.js';
import { compileValueRules, replaceRanges } from './text.js';

function redactWith(detector: PiiDetector, text: string): string {
  const rules = compileValueRules([], [detector]);
  const ranges: number[] = [];
  rules.collect(text, rules.gate(text), ranges);
  return replaceRanges(text, ranges);
}

describe('email', () => {
  it.each([
    ['mail jane.roe+tag@example.co.uk now', 'mail [REDACTED] now'],
    ['<john_doe@mail.example.org>', '<[REDACTED]>'],
    ['a@b.cd and c@d.ef', '[REDACTED] and [REDACTED]'],
  ])('%s → %s', (text, expected) => {
    expect(redactWith('email', text)).toBe(expected);
  });

  it.each([
    'user@localhost',
    'npm i left-pad@1.3.0',
    '@decorator on class',
    'docker.io/library/node@sha256:abc123',
    'no at sign here.com',
  ])('keeps %s readable', (text) => {
    expect(redactWith('email', text)).toBe(text);
  });
});

describe('us-ssn', () => {
  it.each([
    ['SSN 123-45-6789.', 'SSN [REDACTED].'],
    ['ssn:078 05 1120', 'ssn:[REDACTED]'],
    ['(123-45-6789)', '([REDACTED])'],
  ])('%s → %s', (text, expected) => {
    expect(redactWith('us-ssn', text)).toBe(expected);
  });

  it.each([
    ['area 000', '000-12-3456'],
    ['area 666', '666-12-3456'],
    ['area 9xx', '912-34-5678'],
    ['group 00', '123-00-4567'],
    ['serial 0000', '123-45-0000'],
    ['mixed separators', '123-45 6789'],
    ['longer number', '1123-45-6789'],
    ['glued to a word', 'ORD-123-45-6789'],
    ['followed by digits', '123-45-67890'],
    ['plain run', '123456789'],
  ])('keeps %s readable: %s', (_, text) => {
    expect(redactWith('us-ssn', text)).toBe(text);
  });
});

describe('phone', () => {
  it.each([
    ['call +44 20 7946 0958 today', 'call [REDACTED] today'],
    ['+14155552671', '[REDACTED]'],
    ['+49 (0)30 901820', '[REDACTED]'],
    ['(415) 555-2671', '[REDACTED]'],
    ['415-555-2671', '[REDACTED]'],
    ['415.555.2671', '[REDACTED]'],
    ['1-415-555-2671', '[REDACTED]'],
    ['+1 (415) 555-2671', '[REDACTED]'],
    ['tel: 415 555 2671.', 'tel: [REDACTED].'],
  ])('%s → %s', (text, expected) => {
    expect(redactWith('phone', text)).toBe(expected);
  });

  it.each([
    ['a plain digit run', '4155552671'],
    ['a date', '2026-11-21'],
    ['a date-time', '2026-11-21T10:30:00+01:00'],
    ['a version with build metadata', 'v1.2.3+20260101123456'],
    ['an IPv4 address', '192.168.100.200'],
    ['an IP-like dotted run', '10.415.555.2671'],
    ['an order id', 'ORD-415-555-2671'],
    ['a NANP number with area code 1xx', '123-456-7890'],
    ['a NANP number with exchange 1xx', '415-155-2671'],
    ['a short E.164', '+1234567'],
    ['scientific notation', '1.5e+12345678'],
    ['a UUID', '123e4567-e89b-12d3-a456-426614174000'],
    ['an ISBN', '978-3-06-406156-9'],
  ])('keeps %s readable: %s', (_, text) => {
    expect(redactWith('phone', text)).toBe(text);
  });
});

describe('credit-card', () => {
  it.each([
    ['card 4111 1111 1111 1111, exp 12/28', 'card [REDACTED], exp 12/28'],
    ['{"pan":"5555555555554444"}', '{"pan":"[REDACTED]"}'],
    ['ref 0041111111111111117', 'ref 00[REDACTED]7'],
  ])('%s → %s', (text, expected) => {
    expect(redactWith('credit-card', text)).toBe(expected);
  });

  it.each([
    ['a mistyped card', '4111 1111 1111 1112'],
    ['a ms timestamp', 'at 1763712000001'],
    ['a ns timestamp', 'at 1763712000000000001'],
    ['a hex id', 'span 4d3a4111111111111111f7'],
    ['an order id', 'ORD-4111-1111'],
    ['a card inside an identifier', 'ORD-4111111111111111'],
    ['a decimal fraction', '0.4111111111111111'],
    ['a 65-digit run', `${'1'.repeat(49)}4111111111111111`],
  ])('keeps %s readable', (_, text) => {
    expect(redactWith('credit-card', text)).toBe(text);
  });
});

describe('tokenDigits', () => {
  it('counts the longest number, strict or loose, and skips digits glued to a word', () => {
    expect(tokenDigits('call 415-555-2671', 0, 99, false)).toBe(10);
    expect(tokenDigits('call (415) 555-2671', 0, 99, false)).toBe(7);
    expect(tokenDigits('call (415) 555-2671', 0, 99, true)).toBe(10);
    expect(tokenDigits('abc123456789', 0, 99, true)).toBe(0);
    expect(tokenDigits('x12 415-555-2671', 0, 99, true)).toBe(10);
    expect(tokenDigits('4111 1111 1111 1111', 0, 13, false)).toBe(13);
  });
});

describe('cheap pre-checks', () => {
  // The pre-checks decide whether RE2 runs at all, so one that says "no" wrongly is a leak. For
  // random strings built from the characters that matter, a detector that finds anything must
  // have been let through.
  const alphabet = '0123456789012345678901234567890123456789 -.()+@aZ_x.:/';
  let seed = 42;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const samples: string[] = [];
  for (let i = 0; i < 20_000; i++) {
    let s = '';
    const len = 8 + Math.floor(random() * 40);
    for (let k = 0; k < len; k++) s += alphabet[Math.floor(random() * alphabet.length)];
    samples.push(s);
  }
  const positives = [
    (n: number) => `u${n}@ex${n % 7}.com`,
    (n: number) => `${100 + (n % 500)}-${10 + (n % 89)}-${1000 + (n % 8999)}`,
    (n: number) => ['4111 1111 1111 1111', '5555555555554444', '378282246310005'][n % 3]!,
    (n: number) => [`+1 415 555 ${1000 + n}`, `(212) 555-${1000 + n}`][n % 2]!,
  ];
  for (let i = 0; i < 2000; i++) {
    const junk = samples[i]!;
    const cut = Math.floor(random() * junk.length);
    const positive = positives[i % positives.length]!(i);
    samples.push(`${junk.slice(0, cut)} ${positive} ${junk.slice(cut)}`);
  }

  it.each(['email', 'us-ssn', 'credit-card', 'phone'] as const)(
    'never refuse a string in which %s finds a match',
    (detector) => {
      const rules = compileValueRules([], [detector]);
      let found = 0;
      for (const s of samples) {
        const ranges: number[] = [];
        rules.collect(s, 0b10, ranges); // run the detector without its pre-check
        if (ranges.length > 0) {
          found++;
          expect(rules.gate(s), s).not.toBe(0);
        }
      }
      expect(found).toBeGreaterThan(0);
    },
  );

  it.each(['email', 'us-ssn', 'credit-card', 'phone'] as const)(
    'let %s find every match when several follow each other (checks at later offsets)',
    (detector) => {
      const rules = compileValueRules([], [detector]);
      const count = (s: string) => {
        const ranges: number[] = [];
        rules.collect(s, rules.gate(s), ranges);
        return ranges.length / 2;
      };
      const hits = samples.filter((s) => count(s) > 0);
      expect(hits.length).toBeGreaterThan(3);
      // `;` joins nothing, so matches in the joined text are exactly those of its pieces.
      for (let i = 0; i + 2 < hits.length; i += 3) {
        const pieces = [samples[(i * 7) % samples.length]!, hits[i]!, hits[i + 1]!, hits[i + 2]!];
        const joined = pieces.join(' ; ');
        expect(count(joined), joined).toBe(pieces.reduce((n, p) => n + count(p), 0));
      }
    },
  );
});

describe('finders', () => {
  // Each finder replaces an RE2 expression (RE2 calls cost microseconds each); it must find the
  // same matches, start and end, scanning from every offset RE2 would be asked to scan from.
  const EXPRESSIONS: [string, Finder, string][] = [
    [
      'email',
      findEmail,
      '[A-Za-z0-9._%+\\-]+@[A-Za-z0-9](?:[A-Za-z0-9\\-]*[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9\\-]*[A-Za-z0-9])?)*\\.[A-Za-z]{2,63}',
    ],
    ['us-ssn', findSsn, '\\d{3}-\\d{2}-\\d{4}|\\d{3} \\d{2} \\d{4}'],
    ['credit-card', findCard, '\\d(?:[ \\-]?\\d){12,}'],
    ['E.164', findE164, '\\+[1-9](?:[ .\\-]?\\(?\\d\\)?){7,14}'],
    [
      'NANP',
      findNanp,
      '(?:\\+?1[ .\\-]?)?(?:\\(\\d{3}\\)[ .\\-]?|\\d{3}[ .\\-])\\d{3}[ .\\-]\\d{4}',
    ],
  ];
  // Characters every expression treats specially, letters that can or cannot end a domain, and
  // non-ASCII (astral, lone surrogate) to check UTF-16 offsets.
  const alphabets = [
    '0123456789 -.()+',
    '01234567891 -.()+@',
    'abcXYZ09@.-_%+ @.a.b',
    'ab1@.-@c.de.f-g.hij',
    '0123456789aZ@.-_%+() é😀\ud800',
  ];
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const samples: string[] = [
    'mail jane.roe+tag@example.co.uk now',
    'a@b.cd-.ef a@b..cd a@-b.cd a@b-.cd x@y.z1 q@r.st@u.vw',
    `u@d.${'a'.repeat(70)} +1 (415) 555-2671 +44 (0)20 7946 0958 1-415-555-2671`,
    '4111 1111 1111 1111 0425 4111--1111 1111 1111 1111',
    '+1234567890123456789 ++12345678 (415)555-2671 (415) -555-2671',
  ];
  for (const alphabet of alphabets) {
    for (let i = 0; i < 4000; i++) {
      let s = '';
      const len = 4 + Math.floor(random() * 60);
      for (let k = 0; k < len; k++) s += alphabet[Math.floor(random() * alphabet.length)];
      samples.push(s);
    }
  }

  it.each(EXPRESSIONS)('%s: the same matches as RE2', (_, find, source) => {
    const re = new RE2(source, 'gu');
    let matched = 0;
    for (const s of samples) {
      for (let from = 0; from <= s.length; from++) {
        re.lastIndex = from;
        const m = re.exec(s);
        const start = find(s, from);
        const got = start < 0 ? 'none' : `${start}..${matchEnd}`;
        const want = m === null ? 'none' : `${m.index}..${m.index + m[0].length}`;
        if (got !== want) expect({ s, from, got }).toEqual({ s, from, got: want });
        if (m !== null) matched++;
      }
    }
    expect(matched).toBeGreaterThan(100);
  });
});

describe('value patterns', () => {
  it('replace only the matched part, every match, with UTF-16 offsets after astral characters', () => {
    const rules = compileValueRules([new RE2('sk-[a-z0-9]{6,}', 'gu')], []);
    const text = '😀 keys sk-abc123 and sk-def4567, not sk-12';
    const ranges: number[] = [];
    rules.collect(text, rules.gate(text), ranges);
    expect(replaceRanges(text, ranges)).toBe('😀 keys [REDACTED] and [REDACTED], not sk-12');
  });

  it('skip empty matches instead of looping', () => {
    const rules = compileValueRules([new RE2('x*', 'gu'), new RE2('y*', 'gu')], []);
    const ranges: number[] = [];
    rules.collect('abxxcyd', rules.gate('abxxcyd'), ranges);
    expect(replaceRanges('abxxcyd', ranges)).toBe('ab[REDACTED]c[REDACTED]d');
  });
});

describe('replaceRanges', () => {
  it('merges overlapping and touching ranges into one replacement', () => {
    expect(replaceRanges('0123456789', [2, 5, 4, 7, 7, 8])).toBe('01[REDACTED]89');
    expect(replaceRanges('0123456789', [6, 8, 0, 1])).toBe('[REDACTED]12345[REDACTED]89');
    expect(replaceRanges('abc', [])).toBe('abc');
  });
});
