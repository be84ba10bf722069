import {
  type Document,
  isAlias,
  isScalar,
  Lexer,
  LineCounter,
  type Node,
  parseAllDocuments,
  visit,
} from 'yaml';

/**
 * The one YAML reader (config file, CLI `-f` files, run specs given as text, `TOUCHSTONE_*`
 * values). The `yaml` package on its own turns an alias or merge bomb into a plain ReferenceError
 * (a 500, or a crash) and spends quadratic time on many anchors or keys, so every text is read
 * here under fixed caps, and every problem comes back as a short description with its place,
 * never a quote of the text (it may hold secrets).
 */

/** Aliases (`*name`, merges included) in one text; resource files and configs use a handful. */
export const YAML_MAX_ALIASES = 100;
/** Flow collections (`[`, `{`) open at once. */
export const YAML_MAX_DEPTH = 64;

export interface YamlProblem {
  /** 0-based index of the document (`---`) it is in; absent for limits on the whole text. */
  document?: number;
  line?: number;
  column?: number;
  /** What is wrong, in words; never the text itself. */
  message: string;
}

export type YamlResult = { ok: true; documents: unknown[] } | { ok: false; problem: YamlProblem };

export interface YamlOptions {
  /** Refuse texts longer than this many UTF-8 bytes (the parser needs about 20 µs per token). */
  maxBytes?: number;
}

/**
 * The values of the text's documents (empty ones skipped), or its first problem. Syntax errors,
 * duplicate keys, an alias inside the node it names, more than YAML_MAX_ALIASES aliases, flow nesting deeper than YAML_MAX_DEPTH,
 * an alias that expands too far and a text over `maxBytes` are problems; nothing throws.
 */
export function parseYaml(text: string, options: YamlOptions = {}): YamlResult {
  if (options.maxBytes !== undefined && Buffer.byteLength(text, 'utf8') > options.maxBytes) {
    return fail({ message: `longer than ${options.maxBytes} bytes` });
  }
  const scanned = scan(text);
  if (scanned !== undefined) return fail(scanned);
  const lines = new LineCounter();
  // Duplicate keys are found below in linear time; the package's own check is quadratic.
  const docs = parseAllDocuments(text, {
    uniqueKeys: false,
    prettyErrors: true,
    lineCounter: lines,
  });
  const list = Array.isArray(docs) ? docs : [docs];
  const documents: unknown[] = [];
  for (const [i, doc] of list.entries()) {
    const error = doc.errors[0];
    if (error !== undefined) {
      const pos = error.linePos?.[0];
      return fail({
        document: i,
        ...(pos === undefined ? {} : { line: pos.line, column: pos.col }),
        message: words(error.code),
      });
    }
    const duplicate = duplicateKey(doc, lines) ?? selfAlias(doc, lines);
    if (duplicate !== undefined) return fail({ document: i, ...duplicate });
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: YAML_MAX_ALIASES });
    } catch (err) {
      return fail({
        document: i,
        message:
          err instanceof ReferenceError
            ? `an alias expands to more than ${YAML_MAX_ALIASES} nodes`
            : 'the document cannot be read (nested too deeply)',
      });
    }
    if (value !== null && value !== undefined) documents.push(value);
  }
  return { ok: true, documents };
}

/** `line 3, column 5: duplicate key`, with `document 2, ` when it is not in the first document. */
export function describeYamlProblem(problem: YamlProblem): string {
  const where = [
    ...(problem.document !== undefined && problem.document > 0
      ? [`document ${problem.document + 1}`]
      : []),
    ...(problem.line === undefined ? [] : [`line ${problem.line}, column ${problem.column}`]),
  ].join(', ');
  return where === '' ? problem.message : `${where}: ${problem.message}`;
}

function fail(problem: YamlProblem): YamlResult {
  return { ok: false, problem };
}

/** `DUPLICATE_KEY` → `duplicate key`. */
function words(code: string): string {
  return code.toLowerCase().replace(/_/g, ' ');
}

/**
 * Counts aliases and flow depth on the lexer's tokens (linear, stops at the first excess), before
 * the parser's costlier work. A token after the scalar mark (`\u001f`) is a scalar's text, even
 * when it starts with `*`, `[` or `{`.
 */
function scan(text: string): YamlProblem | undefined {
  let aliases = 0;
  let depth = 0;
  let scalar = false;
  for (const token of new Lexer().lex(text)) {
    if (scalar) {
      scalar = false;
      continue;
    }
    const c = token[0];
    if (c === '\u001f') scalar = true;
    else if (c === '*') {
      aliases++;
      if (aliases > YAML_MAX_ALIASES) return { message: `more than ${YAML_MAX_ALIASES} aliases` };
    } else if (c === '[' || c === '{') {
      depth++;
      if (depth > YAML_MAX_DEPTH) {
        return { message: `collections nested more than ${YAML_MAX_DEPTH} deep` };
      }
    } else if (c === ']' || c === '}') depth = Math.max(0, depth - 1);
  }
  return undefined;
}

/** The first key that appears twice in one mapping (scalar keys; `<<` merges may repeat). */
function duplicateKey(
  doc: Document.Parsed,
  lines: LineCounter,
): Omit<YamlProblem, 'document'> | undefined {
  let found: Omit<YamlProblem, 'document'> | undefined;
  visit(doc, {
    Map(_, map) {
      const seen = new Set<unknown>();
      for (const { key } of map.items) {
        if (!isScalar(key) || key.value === '<<') continue;
        if (seen.has(key.value)) {
          found = { ...place(key, lines), message: 'duplicate key' };
          return visit.BREAK;
        }
        seen.add(key.value);
      }
      return undefined;
    },
  });
  return found;
}

/**
 * The first alias inside the node it names (`&a [*a]`): its value would hold itself, which every
 * JSON writer and schema walk after the read fails on (a TypeError, or no end). An alias names
 * the last node with its anchor before it in document order, the order `visit` walks.
 */
function selfAlias(
  doc: Document.Parsed,
  lines: LineCounter,
): Omit<YamlProblem, 'document'> | undefined {
  const anchored = new Map<string, unknown>();
  let found: Omit<YamlProblem, 'document'> | undefined;
  visit(doc, {
    Node(_, node, path) {
      if (!isAlias(node)) {
        if (node.anchor !== undefined) anchored.set(node.anchor, node);
        return undefined;
      }
      const named = anchored.get(node.source);
      if (named === undefined || !path.includes(named as Node)) return undefined;
      found = { ...place(node, lines), message: 'an alias inside the node it names' };
      return visit.BREAK;
    },
  });
  return found;
}

function place(node: Node, lines: LineCounter): { line?: number; column?: number } {
  const at =
    node.range === undefined || node.range === null ? undefined : lines.linePos(node.range[0]);
  return at === undefined ? {} : { line: at.line, column: at.col };
}
