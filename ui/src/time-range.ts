/** The time ranges the list and chart filters offer, and what they mean now. */

export const RANGES = [
  { value: '15m', label: 'Last 15 minutes', ms: 15 * 60_000 },
  { value: '1h', label: 'Last hour', ms: 3_600_000 },
  { value: '6h', label: 'Last 6 hours', ms: 6 * 3_600_000 },
  { value: '24h', label: 'Last 24 hours', ms: 24 * 3_600_000 },
  { value: '7d', label: 'Last 7 days', ms: 7 * 24 * 3_600_000 },
  { value: '30d', label: 'Last 30 days', ms: 30 * 24 * 3_600_000 },
] as const;

/** Epoch ms of the range's start, or undefined for "any time". */
export function rangeStart(range: string | null, now: number): number | undefined {
  const found = RANGES.find((r) => r.value === range);
  return found === undefined ? undefined : now - found.ms;
}

/** `2026-11-22T10:00` (a datetime-local input's value) ↔ RFC 3339. */
export function toLocalInput(iso: string | null): string {
  if (iso === null || iso === '') return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const local = new Date(d.getTime() - d.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

export function fromLocalInput(value: string): string | undefined {
  if (value === '') return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}
