/**
 * JSON Schema (as `z.toJSONSchema` writes it, draft 2020-12) → the structural OpenAPI v3 subset a
 * CustomResourceDefinition accepts: every node typed (or marked free-form), no `$ref`, no types
 * inside `anyOf`/`oneOf`, no `const`, no `additionalProperties: false` (the API server prunes and,
 * with strict field validation, refuses unknown fields instead), OpenAPI 3.0's boolean
 * `exclusiveMinimum`. What the subset cannot say (map key rules, unions of different types,
 * patterns Go's regexp cannot compile) is left to the API's own validation, which the server
 * always runs.
 */
import RE2 from 're2';

export type Json = { [key: string]: unknown };

/** Keys of a schema node the CRD format knows and this conversion keeps as they are. */
const KEPT = [
  'description',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
  'uniqueItems',
  'multipleOf',
  'enum',
  'required',
] as const;

/** String formats the API server checks; others would be ignored, so are dropped. */
const KNOWN_FORMATS = new Set(['date-time', 'date', 'uri', 'email', 'uuid', 'byte', 'duration']);

const PRESERVE = 'x-kubernetes-preserve-unknown-fields';

function isJson(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Whether Go's regexp (RE2, as the API server) can compile the pattern. */
function re2Compiles(pattern: string): boolean {
  try {
    new RE2(pattern, 'u');
    return true;
  } catch {
    return false;
  }
}

/** The bounds `z.int()` adds (±2^53−1) say nothing a CRD reader needs. */
function meaningfulBound(value: unknown): boolean {
  return typeof value === 'number' && Math.abs(value) < Number.MAX_SAFE_INTEGER;
}

class Converter {
  constructor(private readonly defs: Json) {}

  convert(node: Json, seen: readonly string[] = []): Json {
    if (typeof node.$ref === 'string') return this.ref(node.$ref, seen);
    const union = (node.anyOf ?? node.oneOf) as Json[] | undefined;
    if (union !== undefined) return withDescription(this.union(union, seen), node);
    if (node.const !== undefined)
      return this.convert({ ...omit(node, 'const'), enum: [node.const] });
    switch (node.type) {
      case 'object':
        return this.object(node, seen);
      case 'array':
        return this.array(node, seen);
      case 'string':
      case 'number':
      case 'integer':
      case 'boolean':
        return scalar(node);
      default:
        // `z.unknown()` and friends: anything goes here; the API checks it.
        return withDescription({ [PRESERVE]: true }, node);
    }
  }

  private ref(ref: string, seen: readonly string[]): Json {
    // A recursive schema cannot be inlined; below the first level it is free-form.
    if (seen.includes(ref)) return { [PRESERVE]: true };
    const name = ref.replace(/^#\/(\$defs|definitions)\//, '');
    const target = this.defs[name];
    if (!isJson(target)) throw new Error(`unresolved schema reference ${ref}`);
    return this.convert(target, [...seen, ref]);
  }

  private object(node: Json, seen: readonly string[]): Json {
    const out: Json = { type: 'object' };
    copyKept(node, out);
    const properties = node.properties;
    if (isJson(properties)) {
      out.properties = Object.fromEntries(
        Object.entries(properties).map(([k, v]) => [k, this.convert(v as Json, seen)]),
      );
    }
    const extra = node.additionalProperties;
    if (isJson(extra)) {
      const typed = this.convert(extra, seen);
      // A map (record): its value schema. Fixed fields plus a catch-all: keep what is unknown.
      if (out.properties === undefined && typed[PRESERVE] !== true)
        out.additionalProperties = typed;
      else out[PRESERVE] = true;
    }
    return out;
  }

  private array(node: Json, seen: readonly string[]): Json {
    const out: Json = { type: 'array' };
    copyKept(node, out);
    out.items = isJson(node.items) ? this.convert(node.items, seen) : { [PRESERVE]: true };
    return out;
  }

  /**
   * A union: `X | null` is X nullable; a union of objects is one object with every branch's
   * fields, each branch kept as a value validation (its required fields, its enum-valued fields,
   * and, for strict branches, none of the other branches' fields); `int | string` is
   * int-or-string; any other mix of types is free-form.
   */
  private union(branches: Json[], seen: readonly string[]): Json {
    const nonNull = branches.filter((b) => b.type !== 'null');
    const nullable = nonNull.length < branches.length ? { nullable: true } : {};
    if (nonNull.length === 1) return { ...this.convert(nonNull[0] as Json, seen), ...nullable };
    const converted = nonNull.map((b) => this.convert(b, seen));
    const types = new Set(converted.map((b) => b.type));
    if (types.size === 1 && types.has('object')) {
      return { ...this.objectUnion(nonNull, converted), ...nullable };
    }
    if (types.size === 2 && types.has('integer') && types.has('string')) {
      return { 'x-kubernetes-int-or-string': true, ...nullable };
    }
    if (types.size === 1 && !types.has(undefined) && !types.has('array')) {
      return { type: [...types][0], ...nullable };
    }
    return { [PRESERVE]: true, ...nullable };
  }

  private objectUnion(raw: Json[], converted: Json[]): Json {
    const properties: Json = {};
    for (const branch of converted) {
      for (const [k, v] of Object.entries((branch.properties ?? {}) as Json)) {
        properties[k] = k in properties ? mergeProperty(properties[k] as Json, v as Json) : v;
      }
    }
    const names = Object.keys(properties);
    const alternatives = converted.map((branch, i) => {
      const own = Object.keys((branch.properties ?? {}) as Json);
      const alt: Json = {};
      if (Array.isArray(branch.required) && branch.required.length > 0) {
        alt.required = branch.required;
      }
      const enums = Object.entries((branch.properties ?? {}) as Json).filter(([, v]) =>
        Array.isArray((v as Json).enum),
      );
      if (enums.length > 0) {
        alt.properties = Object.fromEntries(enums.map(([k, v]) => [k, { enum: (v as Json).enum }]));
      }
      const foreign = names.filter((n) => !own.includes(n));
      if (raw[i]?.additionalProperties === false && foreign.length > 0) {
        alt.not = { anyOf: foreign.map((n) => ({ required: [n] })) };
      }
      return alt;
    });
    const out: Json = { type: 'object', properties };
    if (converted.some((b) => b[PRESERVE] === true)) out[PRESERVE] = true;
    if (alternatives.every((a) => Object.keys(a).length > 0)) out.anyOf = alternatives;
    return out;
  }
}

/** One field two branches of a union both have: the same schema, or their common ground. */
function mergeProperty(a: Json, b: Json): Json {
  if (JSON.stringify(a) === JSON.stringify(b)) return a;
  if (a.type === b.type && Array.isArray(a.enum) && Array.isArray(b.enum)) {
    return { ...a, enum: [...new Set([...a.enum, ...b.enum])] };
  }
  if (a.type === b.type && a.type !== 'object' && a.type !== 'array') return { type: a.type };
  return { [PRESERVE]: true };
}

function scalar(node: Json): Json {
  const out: Json = { type: node.type };
  copyKept(node, out);
  if (typeof node.format === 'string' && KNOWN_FORMATS.has(node.format)) out.format = node.format;
  if (typeof node.pattern === 'string' && re2Compiles(node.pattern)) out.pattern = node.pattern;
  if (typeof node.exclusiveMinimum === 'number') {
    out.minimum = node.exclusiveMinimum;
    out.exclusiveMinimum = true;
  }
  if (typeof node.exclusiveMaximum === 'number') {
    out.maximum = node.exclusiveMaximum;
    out.exclusiveMaximum = true;
  }
  for (const bound of ['minimum', 'maximum'] as const) {
    if (!meaningfulBound(out[bound])) delete out[bound];
  }
  return out;
}

function copyKept(from: Json, to: Json): void {
  for (const key of KEPT) {
    const v = from[key];
    if (v === undefined) continue;
    if (key === 'required' && Array.isArray(v) && v.length === 0) continue;
    to[key] = v;
  }
}

function withDescription(out: Json, node: Json): Json {
  return typeof node.description === 'string' ? { description: node.description, ...out } : out;
}

function omit(node: Json, key: string): Json {
  const { [key]: _, ...rest } = node;
  return rest;
}

/** The structural form of a JSON Schema document (its `$defs` inlined). */
export function structuralSchema(document: Json): Json {
  const defs = (document.$defs ?? document.definitions ?? {}) as Json;
  const { $schema: _s, $defs: _d, definitions: _x, ...root } = document;
  return new Converter(defs).convert(root);
}

/**
 * The schema without the patterns Go's regexp cannot compile (lookarounds): Helm checks values
 * with Go too, and refuses a whole schema over one such pattern. The server still checks them.
 */
export function withGoPatterns(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withGoPatterns);
  if (!isJson(node)) return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'pattern' && typeof v === 'string' && !re2Compiles(v)) continue;
    // Under `properties` the keys are field names (a field may be called `pattern`).
    out[k] = k === 'properties' && isJson(v) ? mapValues(v, withGoPatterns) : withGoPatterns(v);
  }
  return out;
}

function mapValues(obj: Json, fn: (v: unknown) => unknown): Json {
  return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, fn(v)]));
}
