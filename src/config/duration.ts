import { z } from 'zod';

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Parses a Go-style duration (`30s`, `1h30m`, `720h`, `0`) into milliseconds; undefined if invalid. */
export function parseDuration(text: string): number | undefined {
  const s = text.trim();
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(s); m !== null; m = re.exec(s)) {
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    matched = re.lastIndex;
  }
  return matched === s.length && matched > 0 ? total : undefined;
}

/** A zod schema for a duration string that outputs milliseconds. */
export const durationMs = z.string().transform((text, ctx) => {
  const ms = parseDuration(text);
  if (ms === undefined) {
    ctx.addIssue({
      code: 'custom',
      message: `"${text}" is not a duration such as 30s, 5m or 720h`,
    });
    return z.NEVER;
  }
  return ms;
});
