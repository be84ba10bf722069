/**
 * The HTTP target's body template. Placeholders are `{{input}}`, `{{recordId}}` and `{{trial}}`.
 * Substitution is JSON-aware, so a template stays valid JSON whatever the record holds:
 * - outside a JSON string a placeholder becomes the value as JSON (`{"q": {{input}}}` with input
 *   `say "hi"` gives `{"q": "say \"hi\""}`; an object input is inserted as an object);
 * - inside a JSON string it becomes the value's text, escaped for that string (`"Q: {{input}}"`
 *   gives `"Q: say \"hi\""`; a non-string input is inserted as its JSON text, escaped).
 * A missing value is `null` outside strings and empty inside them.
 */

export const PLACEHOLDERS = ['input', 'recordId', 'trial'] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];
export type TemplateValues = { [K in Placeholder]: unknown };

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/y;

/**
 * Names in `{{…}}` that are not placeholders (a typo would otherwise send the braces as is). The
 * name is what lies between `{{` and the first `}` when `}}` follows, trimmed. Scanned by hand: the
 * regular expression this replaces backtracked cubically on runs of whitespace.
 */
export function unknownPlaceholders(template: string): string[] {
  const names = new Set<string>();
  let open = template.indexOf('{{');
  while (open >= 0) {
    const close = template.indexOf('}', open + 2);
    if (close < 0) break;
    let next = close + 1;
    if (template.charCodeAt(close + 1) === 0x7d) {
      names.add(template.slice(open + 2, close).trim());
      next = close + 2;
    }
    // No `{{` that starts before `close` can end anywhere else.
    open = template.indexOf('{{', next);
  }
  return [...names].filter((n) => !(PLACEHOLDERS as readonly string[]).includes(n));
}

function asJson(value: unknown): string {
  return value === undefined ? 'null' : JSON.stringify(value);
}

function asStringContent(value: unknown): string {
  if (value === undefined || value === null) return '';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return JSON.stringify(text).slice(1, -1);
}

export function renderTemplate(template: string, values: TemplateValues): string {
  let out = '';
  let inString = false;
  let i = 0;
  while (i < template.length) {
    const c = template[i] as string;
    if (c === '{' && template[i + 1] === '{') {
      PLACEHOLDER.lastIndex = i;
      const m = PLACEHOLDER.exec(template);
      const name = m?.[1];
      if (m !== null && name !== undefined && Object.hasOwn(values, name)) {
        const value = values[name as Placeholder];
        out += inString ? asStringContent(value) : asJson(value);
        i += m[0].length;
        continue;
      }
    }
    if (inString && c === '\\') {
      out += template.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (c === '"') inString = !inString;
    out += c;
    i += 1;
  }
  return out;
}
