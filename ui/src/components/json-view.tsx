import { Text } from './text.js';

/** Pretty, collapsible JSON: objects and arrays fold (`<details>`), values are text. */

const MAX_ITEMS = 500;

function Primitive({ value }: { value: unknown }) {
  if (typeof value === 'string') {
    return (
      <span class="json-string">
        "<Text value={value} />"
      </span>
    );
  }
  if (value === null) return <span class="json-null">null</span>;
  return <span class={`json-${typeof value}`}>{String(value)}</span>;
}

function Node({ name, value, depth }: { name?: string; value: unknown; depth: number }) {
  const label = name === undefined ? null : <span class="json-key">{name}: </span>;
  if (typeof value !== 'object' || value === null) {
    return (
      <div class="json-line">
        {label}
        <Primitive value={value} />
      </div>
    );
  }
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [String(i), v])
    : Object.entries(value as Record<string, unknown>);
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  if (entries.length === 0) {
    return (
      <div class="json-line">
        {label}
        {open}
        {close}
      </div>
    );
  }
  return (
    <details class="json-node" open={depth < 3}>
      <summary>
        {label}
        {open}
        <span class="json-count">
          {entries.length} {Array.isArray(value) ? 'items' : 'keys'}
        </span>
        {close}
      </summary>
      <div class="json-children">
        {entries.slice(0, MAX_ITEMS).map(([k, v]) => (
          <Node key={k} name={k} value={v} depth={depth + 1} />
        ))}
        {entries.length > MAX_ITEMS && (
          <div class="muted">… {entries.length - MAX_ITEMS} more not shown</div>
        )}
      </div>
    </details>
  );
}

export function JsonView({ value, label }: { value: unknown; label?: string }) {
  return (
    <div class="json" title={label}>
      <Node value={value} depth={0} />
    </div>
  );
}

/** A value as the record holds it: text as text (pre-wrapped), anything else as JSON. */
export function ValueView({ value, label }: { value: unknown; label?: string }) {
  if (value === undefined) return <span class="muted">—</span>;
  if (typeof value === 'string') {
    return (
      <pre class="text-block">
        <Text value={value} />
      </pre>
    );
  }
  return <JsonView value={value} {...(label === undefined ? {} : { label })} />;
}
