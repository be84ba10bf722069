// A Touchstone plug-in evaluator (wasi-json v1) in AssemblyScript with @assemblyscript/wasi-shim:
// one JSON request on stdin, one JSON response on stdout. The module's top-level code is its
// `_start`. A small JSON reader walks the record's top-level fields.
// Build: npx asc assembly/index.ts --config asconfig.json --target release

function isSpace(c: u8): bool {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipWs(s: Uint8Array, i: i32): i32 {
  while (i < s.length && isSpace(s[i])) i++;
  return i;
}

/** The index just after the JSON value at `i`, or -1 when it is malformed. */
function skipValue(s: Uint8Array, i: i32): i32 {
  i = skipWs(s, i);
  if (i >= s.length) return -1;
  const c = s[i];
  if (c === 0x22) {
    i++;
    while (i < s.length && s[i] !== 0x22) i += s[i] === 0x5c ? 2 : 1;
    return i < s.length ? i + 1 : -1;
  }
  if (c === 0x7b || c === 0x5b) {
    const close: u8 = c === 0x7b ? 0x7d : 0x5d;
    i = skipWs(s, i + 1);
    if (i < s.length && s[i] === close) return i + 1;
    while (true) {
      if (close === 0x7d) {
        i = skipValue(s, i);
        if (i < 0) return -1;
        i = skipWs(s, i);
        if (i >= s.length || s[i] !== 0x3a) return -1;
        i++;
      }
      i = skipValue(s, i);
      if (i < 0) return -1;
      i = skipWs(s, i);
      if (i >= s.length) return -1;
      if (s[i] === 0x2c) {
        i++;
        continue;
      }
      return s[i] === close ? i + 1 : -1;
    }
  }
  while (i < s.length && !isSpace(s[i]) && s[i] !== 0x2c && s[i] !== 0x7d && s[i] !== 0x5d) i++;
  return i;
}

/** The start of the value of `key` in the object at `i` (top level only), or -1. */
function field(s: Uint8Array, i: i32, key: string): i32 {
  if (i < 0) return -1;
  i = skipWs(s, i);
  if (i >= s.length || s[i] !== 0x7b) return -1;
  i++;
  while (true) {
    i = skipWs(s, i);
    const nameEnd = skipValue(s, i);
    if (nameEnd < 0) return -1;
    const name = String.UTF8.decode(s.slice(i + 1, nameEnd - 1).buffer);
    i = skipWs(s, nameEnd);
    if (i >= s.length || s[i] !== 0x3a) return -1;
    i = skipWs(s, i + 1);
    if (name === key) return i;
    i = skipValue(s, i);
    if (i < 0) return -1;
    i = skipWs(s, i);
    if (i >= s.length || s[i] !== 0x2c) return -1;
    i++;
  }
}

/** The JSON string at `i`, decoded (simple escapes only), or null. */
function stringAt(s: Uint8Array, i: i32): string | null {
  if (i < 0 || i >= s.length || s[i] !== 0x22) return null;
  const end = skipValue(s, i);
  if (end < 0) return null;
  const out = new Uint8Array(end - i);
  let n = 0;
  for (let j = i + 1; j < end - 1; j++) {
    let c = s[j];
    if (c === 0x5c) {
      j++;
      c = s[j];
      if (c === 0x6e) c = 0x0a;
      else if (c === 0x74) c = 0x09;
      else if (c === 0x72) c = 0x0d;
    }
    out[n++] = c;
  }
  return String.UTF8.decode(out.slice(0, n).buffer);
}

function readStdin(): Uint8Array {
  const chunks: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const buf = new ArrayBuffer(65536);
    const n = process.stdin.read(buf);
    if (n <= 0) break;
    chunks.push(Uint8Array.wrap(buf, 0, n));
    total += n;
  }
  const all = new Uint8Array(total);
  let at = 0;
  for (let k = 0; k < chunks.length; k++) {
    all.set(chunks[k], at);
    at += chunks[k].length;
  }
  return all;
}

const request = readStdin();
const record = field(request, 0, 'record');
const output = stringAt(request, field(request, record, 'output'));
const reference = stringAt(request, field(request, record, 'reference'));
if (output === null || reference === null) {
  process.stdout.write('{"skip":{"reason":"output and reference must be text"}}\n');
} else {
  // The sandbox's clock and randomness are deterministic per record (Math.random is seeded
  // from random_get by the shim).
  const random = <u32>(Math.random() * 4294967296.0);
  const time = Date.now();
  const passed = output!.trim() === reference!.trim();
  process.stdout.write(
    '{"scores":[{"name":"exact_match","passed":' +
      (passed ? 'true' : 'false') +
      ',"metadata":{"random":' +
      random.toString() +
      ',"time":' +
      time.toString() +
      '}}]}\n',
  );
}
