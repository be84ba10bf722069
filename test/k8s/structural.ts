/**
 * The rules a CustomResourceDefinition's schema must follow to be structural (Kubernetes
 * "Specifying a structural schema"), checked offline: every node typed unless marked free-form or
 * int-or-string; inside anyOf/oneOf/allOf/not no type, description, default, nullable or
 * additionalProperties, and only fields also declared outside; properties and
 * additionalProperties never together; only the OpenAPI v3 keywords the API server knows.
 */

type Node = { [key: string]: unknown };

const KNOWN = new Set([
  'type',
  'format',
  'title',
  'description',
  'default',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'multipleOf',
  'enum',
  'maxProperties',
  'minProperties',
  'required',
  'items',
  'allOf',
  'oneOf',
  'anyOf',
  'not',
  'properties',
  'additionalProperties',
  'nullable',
  'example',
  'externalDocs',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
]);

const JUNCTORS = ['allOf', 'anyOf', 'oneOf'] as const;
const NOT_IN_JUNCTORS = ['type', 'description', 'default', 'nullable', 'additionalProperties'];

function isNode(v: unknown): v is Node {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function junctorBranches(node: Node): Node[] {
  const out: Node[] = [];
  for (const j of JUNCTORS) if (Array.isArray(node[j])) out.push(...(node[j] as Node[]));
  if (isNode(node.not)) out.push(node.not);
  return out;
}

/** A value validation inside a junctor: no structure of its own, fields declared outside. */
function checkBranch(branch: Node, outer: Node, path: string, problems: string[]): void {
  for (const key of NOT_IN_JUNCTORS) {
    if (key in branch) problems.push(`${path}: ${key} inside a junctor`);
  }
  const outerProps = (isNode(outer.properties) ? outer.properties : {}) as Node;
  for (const [k, v] of Object.entries(isNode(branch.properties) ? branch.properties : {})) {
    if (!(k in outerProps)) problems.push(`${path}.${k}: not declared outside the junctor`);
    else if (isNode(v)) checkBranch(v, outerProps[k] as Node, `${path}.${k}`, problems);
  }
  if (isNode(branch.items)) {
    if (!isNode(outer.items)) problems.push(`${path}: items not declared outside the junctor`);
    else checkBranch(branch.items, outer.items, `${path}[]`, problems);
  }
  for (const nested of junctorBranches(branch)) checkBranch(nested, outer, path, problems);
}

export function structuralProblems(node: Node, path = '', problems: string[] = []): string[] {
  for (const key of Object.keys(node)) {
    if (!KNOWN.has(key)) problems.push(`${path || '(root)'}: unknown keyword ${key}`);
  }
  const freeForm =
    node['x-kubernetes-preserve-unknown-fields'] === true ||
    node['x-kubernetes-int-or-string'] === true;
  if (typeof node.type !== 'string' && !freeForm) problems.push(`${path || '(root)'}: no type`);
  if (node.properties !== undefined && node.additionalProperties !== undefined) {
    problems.push(`${path}: properties and additionalProperties together`);
  }
  if (node.additionalProperties === false) problems.push(`${path}: additionalProperties false`);
  if (node.exclusiveMinimum !== undefined && typeof node.exclusiveMinimum !== 'boolean') {
    problems.push(`${path}: exclusiveMinimum must be a boolean in OpenAPI v3.0`);
  }
  for (const branch of junctorBranches(node)) checkBranch(branch, node, path, problems);
  if (isNode(node.properties)) {
    for (const [k, v] of Object.entries(node.properties)) {
      structuralProblems(v as Node, `${path}.${k}`, problems);
    }
  }
  if (isNode(node.additionalProperties)) {
    structuralProblems(node.additionalProperties, `${path}{}`, problems);
  }
  if (isNode(node.items)) structuralProblems(node.items, `${path}[]`, problems);
  return problems;
}
