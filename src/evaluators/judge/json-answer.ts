/**
 * Reads the JSON object a judge model was asked for. Accepts the bare object, or the first
 * fenced ```json block (models that ignore `response_format` often wrap their answer so).
 * Anything else is undefined: callers turn that into an error that never quotes the answer.
 */
export function parseJsonObject(content: string): Record<string, unknown> | undefined {
  const text = content.trim();
  const direct = tryObject(text);
  if (direct !== undefined) return direct;
  const fenced = /```(?:json)?[ \t]*\r?\n([\s\S]*?)\r?\n?[ \t]*```/i.exec(text);
  return fenced?.[1] === undefined ? undefined : tryObject(fenced[1].trim());
}

function tryObject(text: string): Record<string, unknown> | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
  } catch {
    // Not JSON: the caller reports it without echoing the text.
  }
  return undefined;
}
