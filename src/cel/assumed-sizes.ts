/**
 * The sizes the cost estimate (estimate.ts) assumes of a trace, and what it knows of a value: the
 * largest it can be, and its literal when it is one. docs/policies.md, "Evaluation cost".
 */
import { textCost } from './cost.js';

/** What the estimate knows of a value: the largest it can be, and its literal when it is one. */
export interface Size {
  readonly kind: 'scalar' | 'text' | 'list' | 'map' | 'dyn';
  /** Length, when text (or possibly text). */
  readonly chars: number;
  /** Elements or entries, when a list or map (or possibly one). */
  readonly items: number;
  /** A map's keys. */
  readonly key?: Size;
  /** A list's elements or a map's values. */
  readonly elem?: Size;
  /** What walking the whole value costs (see deepCost). */
  readonly deep: number;
  readonly literal?: string | bigint;
}

/** The sizes the estimate assumes; docs/policies.md lists them. */
export const ASSUMED = {
  /** service, name, project, source, label values. */
  nameChars: 1024,
  /** Tool and model names (LLM APIs cap tool names at 64), keys of labels, attributes, scores. */
  keyChars: 128,
  /** tools and models. */
  listItems: 1000,
  /** attributes, resource and scores. */
  mapEntries: 128,
  labelEntries: 64,
  /** A string attribute value; and a whole attribute value, walked. */
  attributeChars: 65_536,
  /** A list attribute value; its elements are names, or maps of names. */
  attributeItems: 1000,
  /** An override's input and output. */
  textChars: 65_536,
} as const;

export const SCALAR: Size = { kind: 'scalar', chars: 0, items: 0, deep: 0 };
/** The size of nothing yet: what a map or filter has gathered before its first element. */
export const NONE: Size = { kind: 'list', chars: 0, items: 0, deep: 0 };

export function text(chars: number, literal?: string): Size {
  return {
    kind: 'text',
    chars,
    items: 0,
    deep: textCost(chars),
    ...(literal === undefined ? {} : { literal }),
  };
}

export function list(items: number, elem: Size): Size {
  return { kind: 'list', chars: 0, items, elem, deep: items * (1 + elem.deep) };
}

export function map(items: number, key: Size, elem: Size): Size {
  return { kind: 'map', chars: 0, items, key, elem, deep: items * (1 + key.deep + elem.deep) };
}

const NAME = text(ASSUMED.nameChars);
export const KEY = text(ASSUMED.keyChars);
const ATTRIBUTE_DEEP = textCost(ASSUMED.attributeChars) + ASSUMED.attributeItems;

/** Part of an attribute value: a name, or a list or map of them, nested. */
const ATTRIBUTE_PART: Size = (() => {
  const part = {
    kind: 'dyn',
    chars: ASSUMED.nameChars,
    items: ASSUMED.mapEntries,
    key: KEY,
    deep: ATTRIBUTE_DEEP,
  } as Size & { elem?: Size };
  part.elem = part;
  return part;
})();

export const ATTRIBUTE: Size = {
  kind: 'dyn',
  chars: ASSUMED.attributeChars,
  items: ASSUMED.attributeItems,
  key: KEY,
  elem: ATTRIBUTE_PART,
  deep: ATTRIBUTE_DEEP,
};

export const VARIABLES: ReadonlyMap<string, Size> = new Map([
  ['service', NAME],
  ['name', NAME],
  ['project', NAME],
  ['source', NAME],
  ['duration', SCALAR],
  ['error', SCALAR],
  ['steps', SCALAR],
  ['tools', list(ASSUMED.listItems, KEY)],
  ['models', list(ASSUMED.listItems, KEY)],
  ['attributes', map(ASSUMED.mapEntries, KEY, ATTRIBUTE)],
  ['resource', map(ASSUMED.mapEntries, KEY, ATTRIBUTE)],
  ['labels', map(ASSUMED.labelEntries, KEY, NAME)],
  ['scores', map(ASSUMED.mapEntries, KEY, SCALAR)],
  ['input', text(ASSUMED.textChars)],
  ['output', text(ASSUMED.textChars)],
]);

/** Either of two sizes, as large as the larger in every respect. */
export function either(a: Size, b: Size): Size {
  if (a === b || b === NONE) return a;
  if (a === NONE) return b;
  const key = a.key === undefined ? b.key : b.key === undefined ? a.key : either(a.key, b.key);
  const elem =
    a.elem === undefined ? b.elem : b.elem === undefined ? a.elem : either(a.elem, b.elem);
  return {
    kind: a.kind === b.kind ? a.kind : 'dyn',
    chars: Math.max(a.chars, b.chars),
    items: Math.max(a.items, b.items),
    ...(key === undefined ? {} : { key }),
    ...(elem === undefined ? {} : { elem }),
    deep: Math.max(a.deep, b.deep),
  };
}

export function isList(s: Size | undefined): boolean {
  return s?.kind === 'list' || s?.kind === 'dyn';
}
