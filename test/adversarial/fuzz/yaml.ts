/**
 * Fuzz target `yaml`: `parseYaml` (src/core/yaml.ts), the one YAML reader of the config file,
 * CLI `-f` files and run specs sent as text. Inputs: the YAML examples of
 * docs/ mutated (characters, cuts, splices, lines, inserted tokens, invalid UTF-8), alias and
 * merge bombs, aliases inside their own anchor, many aliases, many and duplicate keys, deep
 * nesting, long scalars, tags (`!!binary`, `!!set`, custom), directives and many documents.
 *
 * A pass is the documents' values, or a problem (the route answers 400 RUN_SPEC_INVALID with
 * it) that quotes none of the markers put in the text. A failure is an exception (the route
 * answers 500), a value that expands far beyond the text (JSON.stringify, zod and the store
 * walk the aliases as copies) or that refers to itself, and a read slower than the bound.
 * Texts are read with the cap of the one hostile source, a run spec sent as text over REST
 * (16 KiB); the config file and CLI files are the operator's own and read without one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeYamlProblem, parseYaml, type YamlResult } from '../../../src/core/yaml.js';
import { MAX_SPEC_TEXT_BYTES } from '../../../src/runs/spec.js';
import type { FuzzTarget, Trial } from './driver.js';
import { cutText, flipChars, spliceText } from './mutate.js';
import { choose, int, MARKER, marker, pick, type Rand, type Way } from './random.js';

interface YamlInput {
  text: string;
  how: string;
}

// ---- seeds -----------------------------------------------------------------------------------

const DOCS = fileURLToPath(new URL('../../../docs/', import.meta.url));

/**
 * The YAML examples of docs/*.md (policies, sources, webhooks, run specs, the config). Their `*`
 * (globs, quoted) become `x`: a mutation that unquotes one makes an alias of no anchor, which
 * is a way of its own (`unresolved alias`).
 */
function docExamples(): string[] {
  const out: string[] = [];
  for (const file of readdirSync(DOCS).filter((f) => f.endsWith('.md'))) {
    const text = readFileSync(DOCS + file, 'utf8');
    for (const m of text.matchAll(/```yaml\n([\s\S]*?)```/g)) out.push(m[1]!.replaceAll('*', 'x'));
  }
  if (out.length === 0) throw new Error('no YAML examples found in docs/');
  return out;
}

/** An example with a marker scalar added at the end of one of its lines. */
function withMarker(r: Rand, example: string): string {
  const lines = example.split('\n');
  const i = int(r, lines.length);
  lines[i] = `${lines[i]} # ${marker(r)}`.replace(/: # /, `: ${marker(r)} # `);
  if (r() < 0.5) lines.push(`extra: "${marker(r)}"`);
  return lines.join('\n');
}

// ---- hostile texts ---------------------------------------------------------------------------

/** Billion laughs: each level is a list of `width` aliases of the one before. */
function aliasBomb(r: Rand, levels: number, width: number, merge: boolean): string {
  const lines = [merge ? '%YAML 1.1\n---' : '', `l0: &l0 ${merge ? '{k0: x}' : '[x]'}`];
  for (let l = 1; l <= levels; l++) {
    const refs = Array.from({ length: width }, () => `*l${l - 1}`);
    lines.push(
      merge
        ? `l${l}: &l${l} {<<: [${refs.join(', ')}], ${refs.map((a, i) => `k${l}_${i}: ${a}`).join(', ')}}`
        : `l${l}: &l${l} [${refs.join(', ')}]`,
    );
  }
  return lines.join('\n') + (r() < 0.5 ? `\nspec: *l${levels}` : '');
}

/** Without `*`, as the examples (see `docExamples`). */
const ALPHABET = ':-[]{}#&!|>\'"%@`?,. \n\tab01é\u0000\ufeff';
const TOKENS = [
  '&a ',
  '<<: ',
  '!!binary ',
  '!!set ',
  '? ',
  '--- ',
  '...\n',
  '%YAML 1.1\n---\n',
  '|\n',
  '>-\n',
  '"\\',
  "'",
  '\t',
  '\ufeff',
  '\ud800',
];

function mutateExample(r: Rand, examples: readonly string[]): string {
  const seed = withMarker(r, pick(r, examples));
  switch (int(r, 6)) {
    case 0:
      return flipChars(r, seed, ALPHABET, 1 + int(r, 6));
    case 1:
      return cutText(r, seed);
    case 2:
      return spliceText(r, seed, pick(r, examples));
    case 3: {
      const lines = seed.split('\n');
      const i = int(r, lines.length);
      const line = lines[i]!;
      lines[i] = pick(r, [`  ${line}`, line.trimStart(), `${line}\n${line}`, '']);
      return lines.join('\n');
    }
    case 4: {
      const at = int(r, seed.length + 1);
      return seed.slice(0, at) + pick(r, TOKENS) + seed.slice(at);
    }
    default: {
      // Bytes that are not UTF-8, read as the CLI reads a file (each becomes U+FFFD).
      const bytes = Buffer.from(seed, 'utf8');
      const at = int(r, bytes.length + 1);
      const bad = Buffer.from(pick(r, [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xe6, 0x97]]));
      return new TextDecoder().decode(
        Buffer.concat([bytes.subarray(0, at), bad, bytes.subarray(at)]),
      );
    }
  }
}

/** Nesting and lengths a resource never needs, but a parser must still read in linear time. */
function deep(r: Rand): string {
  const n = pick(r, [50, 64, 65, 500]);
  switch (int(r, 4)) {
    case 0:
      return `spec: ${'['.repeat(n)}x${']'.repeat(n)}`;
    case 1:
      return `spec: ${'{a: '.repeat(n)}x${'}'.repeat(n)}`;
    case 2:
      // n² characters: kept to 200 levels (20k characters).
      return Array.from({ length: Math.min(n, 200) }, (_, i) => `${' '.repeat(i)}a:`).join('\n');
    default:
      return `${'- '.repeat(n)}x`;
  }
}

function longScalar(r: Rand, n: number): string {
  const m = marker(r);
  switch (int(r, 5)) {
    case 0:
      return `name: ${m}${'x'.repeat(n)}`;
    case 1:
      return `name: "${m}${'\\u00e9\\n'.repeat(n / 8)}"`;
    case 2:
      return `name: |\n${`  ${m} line\n`.repeat(n / 16)}`;
    case 3:
      return `name: >-\n${`  ${m} folded\n\n`.repeat(n / 16)}`;
    default:
      return `${m}${'k'.repeat(n)}: v`;
  }
}

const keys = (n: number) => Array.from({ length: n }, (_, i) => `k${i}: ${i}`).join('\n');
const documents = (n: number) => '---\na: 1\n'.repeat(n);

/**
 * Texts just under the size cap, as costly per byte as can be (many keys, documents, block
 * nesting), and far over it (refused before the parser sees them).
 */
function huge(r: Rand): string {
  const cut = (text: string) => text.slice(0, MAX_SPEC_TEXT_BYTES - int(r, 64));
  switch (int(r, 5)) {
    case 0:
      return cut(keys(2000));
    case 1:
      return cut(documents(2000));
    case 2:
      return cut(Array.from({ length: 2000 }, (_, i) => `${' '.repeat(i % 60)}a${i}:`).join('\n'));
    case 3:
      return cut(`${'- '.repeat(8000)}x`);
    default:
      return keys(pick(r, [5000, 20_000]));
  }
}

const TAGGED: readonly ((r: Rand) => string)[] = [
  (r) => `data: !!binary ${Buffer.alloc(pick(r, [16, 100_000]), 7).toString('base64')}`,
  () => 'set: !!set {a, b, c}',
  () => 'omap: !!omap [a: 1, b: 2, a: 3]',
  () => 'pairs: !!pairs [a: 1, a: 2]',
  () => 'when: !!timestamp 2001-12-14t21:59:43.10-05:00',
  () => 'n: !!float .nan',
  () => 'n: !!int 0x1F',
  () => 'n: !!int 99999999999999999999999',
  () => 'x: !foo bar',
  () => 'x: !<tag:yaml.org,2002:str> bar',
  () => '%TAG !e! tag:example.com,2000:app/\n---\nx: !e!thing bar',
  () => 'x: !!python/object:os.system ls',
  () => 'x: !!map [1, 2]',
  () => '!!str &a x: *a',
];

/** The ways of making a text. */
function ways(examples: readonly string[]): Way<{ text: string; how: string }>[] {
  const way = (
    name: string,
    weight: number,
    make: (r: Rand) => string,
  ): Way<{ text: string; how: string }> => ({
    name,
    weight,
    make: (r) => ({ text: make(r), how: name }),
  });
  return [
    way('example', 5, (r) => withMarker(r, pick(r, examples))),
    way('mutated example', 45, (r) => mutateExample(r, examples)),
    way('alias bomb', 5, (r) => aliasBomb(r, 2 + int(r, 9), 2 + int(r, 9), false)),
    way('merge bomb', 3, (r) => aliasBomb(r, 2 + int(r, 7), 2 + int(r, 5), true)),
    way('cycle', 2, (r) =>
      pick(r, ['&a [*a]', 'a: &a {b: *a}', '- &x {y: [*x]}', 'a: &a\n  b: *a']),
    ),
    way(
      'many aliases',
      3,
      (r) =>
        `a: &a x\nb: [${Array(pick(r, [50, 100, 101, 5000]))
          .fill('*a')
          .join(', ')}]`,
    ),
    way('many keys', 3, (r) => keys(pick(r, [10, 100, 300]))),
    way('duplicate keys', 2, (r) => `a: 1\nb: ${marker(r)}\na: 2`),
    way('deep', 4, deep),
    way('long scalar', 3, (r) => longScalar(r, pick(r, [1000, 10_000, 100_000]))),
    way('tags', 4, (r) => pick(r, TAGGED)(r)),
    way(
      'directives',
      2,
      (r) =>
        `${pick(r, ['%YAML 1.1', '%YAML 1.3', '%YAML 2.0', '%FOO bar', '%YAML 1.2\n%YAML 1.2'])}\n${r() < 0.7 ? '---\n' : ''}a: 1`,
    ),
    way('documents', 3, (r) => `${documents(pick(r, [2, 30, 300]))}${r() < 0.5 ? '...\n' : ''}`),
    way('huge', 2, huge),
    way('unresolved alias', 2, (r) => {
      const text = withMarker(r, pick(r, examples));
      const at = text.indexOf(': ', int(r, text.length));
      return at < 0
        ? `a: *nope`
        : `${text.slice(0, at + 2)}*${pick(r, ['a', 'nope'])} ${text.slice(at + 2)}`;
    }),
  ];
}

// ---- checks ----------------------------------------------------------------------------------

/**
 * The size of a value as JSON would write it (an alias counts as a copy, as it does for
 * JSON.stringify and every walk after the read), counted up to `cap`; `cyclic` when a value
 * holds itself.
 */
function expandedSize(value: unknown, cap: number): { size: number; cyclic: boolean } {
  let size = 0;
  const open = new Set<object>();
  const walk = (v: unknown): boolean => {
    if (size > cap) return true;
    if (typeof v === 'string') size += v.length + 2;
    else if (typeof v !== 'object' || v === null || v instanceof Date) size += 8;
    else if (v instanceof Uint8Array) size += v.length;
    else {
      if (open.has(v)) return false;
      open.add(v);
      const entries = v instanceof Map || v instanceof Set ? [...v.entries()] : Object.entries(v);
      for (const [k, inner] of entries) {
        size += typeof k === 'string' ? k.length + 3 : 8;
        if (!walk(inner)) return false;
      }
      open.delete(v);
    }
    return true;
  };
  const cyclic = !walk(value);
  return { size, cyclic };
}

const broken = (failure: string): Trial => ({ outcome: 'broken', failure });

function run(input: YamlInput): Trial {
  let read: YamlResult;
  try {
    read = parseYaml(input.text, { maxBytes: MAX_SPEC_TEXT_BYTES });
  } catch (err) {
    const what = err instanceof Error ? `${err.name}: ${err.message.slice(0, 200)}` : String(err);
    return broken(`the read threw (the route answers 500): ${what}`);
  }
  if (!read.ok) {
    if (MARKER.test(describeYamlProblem(read.problem)))
      return broken('the problem quotes the text');
    return { outcome: 'problem' };
  }
  // Linear growth (aliases of a long anchor) is allowed; a bomb grows far past it.
  const bound = 1024 * 1024 + 128 * input.text.length;
  const { size, cyclic } = expandedSize(read.documents, bound);
  if (cyclic) return broken('a value that holds itself (an alias inside its own anchor)');
  if (size > bound) {
    return broken(`the value expands to over ${bound} bytes from ${input.text.length} characters`);
  }
  return { outcome: 'value', figures: { 'characters in': input.text.length, 'bytes out': size } };
}

export async function createYamlTarget(): Promise<FuzzTarget<YamlInput>> {
  const table = ways(docExamples());
  return {
    name: 'yaml',
    generate(r) {
      const { value, way } = choose(r, table);
      return { input: value, mutation: way };
    },
    run,
    describe: (input) => `${input.how}; the reproducer is the UTF-8 text`,
    bytes: (input) => Buffer.from(input.text, 'utf8'),
  };
}
