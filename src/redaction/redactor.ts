/**
 * The redactor: key rules, value rules and PII detectors compiled once from
 * `traces.redaction`, then applied to spans, attributes, labels, free text and JSON.
 *
 * Nothing is mutated. Every method returns its input itself when nothing in it changed, and
 * otherwise a copy that shares every unchanged part with the input (copy on write), so both must be
 * treated as immutable. A string that holds a JSON object or array is parsed and redacted inside
 * (keys and values); it is re-serialized (compactly) only when something in it changed, and kept
 * byte for byte otherwise.
 */
import RE2 from 're2';
import type { Attributes, ErrorDetail, Span, SpanEvent, SpanLink } from '../core/index.js';
import { isCardNumber } from './card.js';
import { RedactionErrors } from './error-codes.js';
import { compileKeyMatcher, globProblem, KEY_ID, KEY_SECRET, type KeyMatcher } from './keys.js';
import { PII_DETECTORS, type PiiDetector } from './pii.js';
import { compileSecrets, SECRET_DETECTORS, type SecretDetector } from './secrets.js';
import {
  collectKeyValues,
  compileValueRules,
  REDACTED,
  replaceRanges,
  type ValueRules,
} from './text.js';

/** `traces.redaction` as the config schema gives it; absent fields take their defaults. */
export interface RedactionConfig {
  /** Key globs added to the defaults (`*` any run of characters, `?` one character). */
  readonly keys?: readonly string[];
  /** RE2 regexes; the matched parts of string values are replaced. */
  readonly patterns?: readonly string[];
  /** PII detectors to enable: `email`, `us-ssn`, `credit-card`, `phone`. */
  readonly pii?: readonly string[];
  /**
   * The built-in secret detectors: true (the default) for all, false for none, or all but the
   * `disabled` ones.
   */
  readonly secrets?: boolean | { readonly disabled?: readonly string[] };
  /** True opts out of all redaction. */
  readonly disabled?: boolean;
}

export interface Redactor {
  /** False when `disabled: true`: every method then returns its input unchanged. */
  readonly enabled: boolean;
  /**
   * Redacted spans (same order). Covers resource attributes (each distinct resource object is
   * redacted once and the result shared again), span, event and link attributes, and the status
   * message (as free text). Span and event names, scope, times and ids are unchanged. Spans with
   * nothing to redact are returned as they are.
   */
  redactSpans(spans: readonly Span[]): Span[];
  /**
   * `redactSpans`, awaiting `pause()` between spans whenever SLICE_CHARS characters of text were
   * read since the last pause: a request of megabytes then does not hold the event loop while
   * its text is scanned.
   */
  redactSpansInSlices(spans: readonly Span[], pause: () => Promise<void>): Promise<Span[]>;
  /** Key rules on every key at any depth, value rules on every string, bytes dropped. */
  redactAttributes(attributes: Attributes): Attributes;
  /**
   * Free text (status messages, connector errors and logs): value rules, PII and secret detectors
   * (the spec's "text rules"), plus `key=value` / `key: value` pairs whose key is a redacted key.
   * JSON text is redacted as JSON.
   */
  redactText(text: string): string;
  /** JSON values (record input/output/metadata, source overrides): as attributes. */
  redactJson(value: unknown): unknown;
  /** Labels: a redacted key's value is replaced; values get the value rules. */
  redactLabels(labels: Readonly<Record<string, string>>): Record<string, string>;
}

/** Nesting (objects, arrays, JSON inside strings) deeper than this is replaced whole. */
export const MAX_DEPTH = 64;

/** Characters of text `redactSpansInSlices` reads between two pauses (a few ms of scanning). */
export const SLICE_CHARS = 32 * 1024;

const CLEAN_CACHE_MAX = 8192;
const CLEAN_CACHE_MAX_LENGTH = 256;
const CONFIG_PATH = 'traces.redaction';
const DROP: unique symbol = Symbol('drop');
type Walked = unknown | typeof DROP;

const PASS_THROUGH: Redactor = {
  enabled: false,
  redactSpans: (spans) => spans as Span[],
  redactSpansInSlices: async (spans) => spans as Span[],
  redactAttributes: (attributes) => attributes,
  redactText: (text) => text,
  redactJson: (value) => value,
  redactLabels: (labels) => labels as Record<string, string>,
};

/**
 * Compiles `traces.redaction` once, at startup. Throws REDACTION_RULE_INVALID naming every invalid
 * rule by its config path (`traces.redaction.patterns[2]`); the error never holds a rule's text,
 * not even in its cause, since rules can themselves be secrets.
 */
export function compileRedaction(config: RedactionConfig): Redactor {
  const keys = config.keys ?? [];
  const patterns = config.patterns ?? [];
  const pii = config.pii ?? [];
  const problems: ErrorDetail[] = [];
  const compiled: RE2[] = [];

  keys.forEach((glob, i) => {
    const problem = typeof glob === 'string' ? globProblem(glob) : 'is not a string';
    if (problem !== undefined) {
      problems.push({ path: `${CONFIG_PATH}.keys[${i}]`, message: `key glob ${problem}` });
    }
  });
  patterns.forEach((pattern, i) => {
    const path = `${CONFIG_PATH}.patterns[${i}]`;
    if (typeof pattern !== 'string' || pattern === '') {
      problems.push({ path, message: 'pattern is empty or not a string' });
      return;
    }
    try {
      compiled.push(new RE2(pattern, 'gu'));
    } catch {
      // RE2's own message quotes the pattern: it must not reach the error.
      problems.push({ path, message: 'not a valid RE2 regular expression' });
    }
  });
  pii.forEach((name, i) => {
    if (!(PII_DETECTORS as readonly string[]).includes(name)) {
      problems.push({
        path: `${CONFIG_PATH}.pii[${i}]`,
        message: `unknown PII detector; known: ${PII_DETECTORS.join(', ')}`,
      });
    }
  });
  const secrets = enabledSecrets(config.secrets, problems);
  if (problems.length > 0) {
    throw RedactionErrors.REDACTION_RULE_INVALID(
      `invalid redaction rule${problems.length > 1 ? 's' : ''} at ${problems.map((p) => p.path).join(', ')}; the server cannot start until ${problems.length > 1 ? 'they are' : 'it is'} fixed`,
      { details: problems },
    );
  }
  if (config.disabled === true) return PASS_THROUGH;

  const detectors = pii as readonly PiiDetector[];
  return new Engine(
    compileKeyMatcher(keys),
    compileValueRules(compiled, detectors, compileSecrets(secrets)),
    detectors.includes('credit-card'),
  );
}

/** The secret detectors `secrets` enables; problems with it are added to `problems`. */
function enabledSecrets(
  secrets: RedactionConfig['secrets'],
  problems: ErrorDetail[],
): SecretDetector[] {
  if (secrets === undefined || secrets === true) return [...SECRET_DETECTORS];
  if (secrets === false) return [];
  const path = `${CONFIG_PATH}.secrets`;
  if (typeof secrets !== 'object' || secrets === null || Array.isArray(secrets)) {
    problems.push({ path, message: 'must be true, false or {disabled: [detector, …]}' });
    return [];
  }
  const disabled = secrets.disabled ?? [];
  disabled.forEach((name, i) => {
    if (!(SECRET_DETECTORS as readonly string[]).includes(name)) {
      problems.push({
        path: `${path}.disabled[${i}]`,
        message: `unknown secret detector; known: ${SECRET_DETECTORS.join(', ')}`,
      });
    }
  });
  return SECRET_DETECTORS.filter((name) => !disabled.includes(name));
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

function isJsonStart(c: number): boolean {
  return c === 0x7b || c === 0x5b; // { [
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** 16 or 32 hex characters: the shape of a span or trace id. */
function isHexId(s: string): boolean {
  if (s.length !== 16 && s.length !== 32) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) | 0x20;
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/** Sets an own property even for `__proto__` (JSON.parse makes such keys own data properties). */
function setOwn(o: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    o[key] = value;
  }
}

/** A shallow copy; spread defines own properties, so a `__proto__` key stays an own property. */
function copyOf(o: Record<string, unknown>): Record<string, unknown> {
  return { ...o };
}

class Engine implements Redactor {
  readonly enabled = true;
  /**
   * Short strings the value rules left unchanged (model names, URLs, enum values repeat across
   * spans). Only clean strings are kept, so no secret outlives the request in this cache.
   */
  private readonly clean = new Set<string>();
  /** Matches text that may hold a redacted key (for skipping JSON.parse); undefined: any may. */
  private readonly keyHint: RegExp | undefined;
  /** Characters of string values read so far (what `redactSpansInSlices` measures slices in). */
  private read = 0;

  constructor(
    private readonly keys: KeyMatcher,
    private readonly values: ValueRules,
    private readonly cards: boolean,
  ) {
    this.keyHint =
      keys.literals === undefined
        ? undefined
        : new RegExp([...keys.literals.map(escapeRegExp), '\\\\u'].join('|'), 'i');
  }

  redactSpans(spans: readonly Span[]): Span[] {
    const resources = new Map<Attributes, Attributes>();
    return spans.map((span) => this.span(span, resources));
  }

  async redactSpansInSlices(spans: readonly Span[], pause: () => Promise<void>): Promise<Span[]> {
    const resources = new Map<Attributes, Attributes>();
    const out: Span[] = new Array(spans.length);
    let sliceStart = this.read;
    for (let i = 0; i < spans.length; i++) {
      out[i] = this.span(spans[i]!, resources);
      if (this.read - sliceStart >= SLICE_CHARS) {
        await pause();
        sliceStart = this.read;
      }
    }
    return out;
  }

  /** One span redacted; each distinct resource object is redacted once per call (`resources`). */
  private span(span: Span, resources: Map<Attributes, Attributes>): Span {
    let resource = resources.get(span.resource);
    if (resource === undefined) {
      resource = this.redactAttributes(span.resource);
      resources.set(span.resource, resource);
    }
    const attributes = this.redactAttributes(span.attributes);
    const events = this.mapEvents(span.events);
    const links = this.mapLinks(span.links);
    const message = this.redactText(span.status.message);
    if (
      resource === span.resource &&
      attributes === span.attributes &&
      events === span.events &&
      links === span.links &&
      message === span.status.message
    ) {
      return span;
    }
    return {
      ...span,
      resource,
      attributes,
      events,
      links,
      status: message === span.status.message ? span.status : { ...span.status, message },
    };
  }

  redactAttributes(attributes: Attributes): Attributes {
    return this.object(attributes, 0) as Attributes;
  }

  redactText(text: string): string {
    if (text === '') return text;
    this.read += text.length;
    const parsed = this.jsonOf(text);
    if (parsed !== undefined) return this.fromJson(text, parsed, 0);
    return this.freeText(text);
  }

  redactJson(value: unknown): unknown {
    const out = this.value(value, 0);
    return out === DROP ? undefined : out;
  }

  redactLabels(labels: Readonly<Record<string, string>>): Record<string, string> {
    let out: Record<string, string> | undefined;
    for (const key of Object.keys(labels)) {
      const value = labels[key]!;
      const redacted = this.keys.classify(key) === KEY_SECRET ? REDACTED : this.string(value, 0);
      if (redacted !== value) {
        out ??= copyOf(labels) as Record<string, string>;
        setOwn(out, key, redacted);
      }
    }
    return out ?? (labels as Record<string, string>);
  }

  private mapEvents(events: SpanEvent[]): SpanEvent[] {
    let out: SpanEvent[] | undefined;
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      const attributes = this.redactAttributes(event.attributes);
      if (attributes !== event.attributes) {
        out ??= events.slice();
        out[i] = { ...event, attributes };
      }
    }
    return out ?? events;
  }

  private mapLinks(links: SpanLink[]): SpanLink[] {
    let out: SpanLink[] | undefined;
    for (let i = 0; i < links.length; i++) {
      const link = links[i]!;
      const attributes = this.redactAttributes(link.attributes);
      if (attributes !== link.attributes) {
        out ??= links.slice();
        out[i] = { ...link, attributes };
      }
    }
    return out ?? links;
  }

  private value(v: unknown, depth: number): Walked {
    switch (typeof v) {
      case 'string':
        return this.string(v, depth);
      case 'number':
        return this.cards && isCardNumber(v) ? REDACTED : v;
      case 'object':
        if (v === null) return v;
        if (ArrayBuffer.isView(v)) return DROP;
        if (depth >= MAX_DEPTH) return REDACTED;
        if (Array.isArray(v)) return this.array(v, depth);
        return this.object(v as Record<string, unknown>, depth);
      default:
        return v;
    }
  }

  private object(o: Record<string, unknown>, depth: number): Record<string, unknown> {
    let out: Record<string, unknown> | undefined;
    // for-in allocates no key array; inherited keys are skipped.
    for (const key in o) {
      if (!Object.hasOwn(o, key)) continue;
      const v = o[key];
      const cls = this.keys.classify(key);
      let r: Walked;
      if (cls === KEY_SECRET) r = REDACTED;
      else if (cls === KEY_ID && typeof v === 'string' && isHexId(v)) r = v;
      else r = this.value(v, depth + 1);
      if (r === v) continue;
      out ??= copyOf(o);
      if (r === DROP) delete out[key];
      else setOwn(out, key, r);
    }
    return out ?? o;
  }

  private array(a: readonly unknown[], depth: number): unknown[] {
    let out: unknown[] | undefined;
    for (let i = 0; i < a.length; i++) {
      const v = a[i];
      const r = this.value(v, depth + 1);
      if (out === undefined) {
        if (r === v) continue;
        out = a.slice(0, i);
      }
      if (r !== DROP) out.push(r);
    }
    return out ?? (a as unknown[]);
  }

  /** A string value: JSON inside is redacted as JSON, other text gets the value rules. */
  private string(s: string, depth: number): string {
    this.read += s.length;
    if (s.length < 2) return this.values.active ? this.plain(s) : s;
    const c = s.charCodeAt(0);
    if (isJsonStart(c) || isSpace(c)) {
      if (!this.jsonMayMatter(s)) return s;
      const parsed = this.jsonOf(s);
      if (parsed !== undefined) return this.fromJson(s, parsed, depth);
      if (isJsonStart(c) || isJsonStart(s.trimStart().charCodeAt(0))) {
        // JSON-looking but unparseable (often cut by the attribute size cap): its `"key": value`
        // pairs are still found as in free text.
        return this.freeText(s);
      }
    }
    return this.values.active ? this.plain(s) : s;
  }

  /** Value rules on text; short clean strings that needed a full scan to prove it are remembered. */
  private plain(s: string): string {
    const mask = this.values.gate(s);
    if (mask === 0) return s;
    const cacheable = s.length <= CLEAN_CACHE_MAX_LENGTH;
    if (cacheable && this.clean.has(s)) return s;
    const ranges: number[] = [];
    this.values.collect(s, mask, ranges);
    if (ranges.length > 0) return replaceRanges(s, ranges);
    if (cacheable) {
      if (this.clean.size >= CLEAN_CACHE_MAX) this.clean.clear();
      this.clean.add(s);
    }
    return s;
  }

  private freeText(s: string): string {
    const ranges: number[] = [];
    this.values.collect(s, this.values.gate(s), ranges);
    if (this.keyHint === undefined || this.keyHint.test(s)) collectKeyValues(s, this.keys, ranges);
    return replaceRanges(s, ranges);
  }

  /** False when no key rule and no value rule can change the JSON text `s` (skips parsing). */
  private jsonMayMatter(s: string): boolean {
    if (this.keyHint === undefined || this.values.hasPatterns) return true;
    // The value checks first: they are cheaper than the key regex, and text they let through is
    // parsed whatever the regex would say.
    return this.values.gate(s) !== 0 || this.keyHint.test(s);
  }

  /** The object or array `s` holds, or undefined when it holds none. */
  private jsonOf(s: string): object | undefined {
    const c = s.charCodeAt(0);
    if (!isJsonStart(c) && !(isSpace(c) && isJsonStart(s.trimStart().charCodeAt(0)))) {
      return undefined;
    }
    try {
      const parsed: unknown = JSON.parse(s);
      return typeof parsed === 'object' && parsed !== null ? parsed : undefined;
    } catch {
      return undefined;
    }
  }

  private fromJson(s: string, parsed: object, depth: number): string {
    const out = this.value(parsed, depth + 1);
    if (out === parsed) return s;
    return typeof out === 'string' ? out : JSON.stringify(out);
  }
}
