/** How numbers, times and durations read in the UI (UTC-free local time, ISO on hover). */

export function formatTime(iso: string | undefined): string {
  if (iso === undefined) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms === 0) return '0 ms';
  if (ms < 1) return '< 1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1000);
  return minutes < 60
    ? `${minutes} min ${seconds} s`
    : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function formatNumber(n: number | null | undefined, digits = 3): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  if (Number.isInteger(n)) return n.toLocaleString();
  return Number(n.toPrecision(digits)).toLocaleString(undefined, { maximumFractionDigits: 6 });
}

export function formatSeconds(s: number | null | undefined): string {
  return s === null || s === undefined ? '—' : formatDuration(s * 1000);
}

/** Milliseconds between two RFC 3339 times (undefined when either is missing). */
export function between(start: string | undefined, end: string | undefined): number | undefined {
  if (start === undefined || end === undefined) return undefined;
  const ms = Date.parse(end) - Date.parse(start);
  return Number.isFinite(ms) ? ms : undefined;
}

/** Text of any value: strings as they are, everything else as indented JSON. */
export function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Parses text that holds JSON (tool arguments are raw strings); undefined when it does not. */
export function parseJson(text: string): unknown {
  const t = text.trim();
  if (!(t.startsWith('{') || t.startsWith('['))) return undefined;
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return undefined;
  }
}

/** Tokens of a usage block: total, else input + output. */
export function tokensOf(
  usage: { inputTokens?: number; outputTokens?: number; totalTokens?: number } | undefined,
): number | undefined {
  if (usage === undefined) return undefined;
  if (usage.totalTokens !== undefined) return usage.totalTokens;
  if (usage.inputTokens === undefined && usage.outputTokens === undefined) return undefined;
  return (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0);
}
