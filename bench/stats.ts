import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';

/** Percentile of a sample (nearest rank). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export function fmt(n: number, digits = 3): string {
  return n.toFixed(digits);
}

/**
 * One GET: its time to the whole body, the server's own time (its `server-timing` header: from
 * the request's arrival to the answer serialized; NaN without one), and the body as JSON;
 * anything but 200 throws.
 */
export async function timedGet(
  url: string,
): Promise<{ ms: number; serverMs: number; body: Record<string, unknown> }> {
  const started = performance.now();
  const res = await fetch(url);
  const text = await res.text();
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status} ${text.slice(0, 300)}`);
  const timing = /app;dur=([0-9.]+)/.exec(res.headers.get('server-timing') ?? '');
  const serverMs = timing === null ? Number.NaN : Number(timing[1]);
  return { ms, serverMs, body: JSON.parse(text) as Record<string, unknown> };
}

/** The machine's load averages (1, 5, 15 min), printed beside every figure. */
export function load(): string {
  return loadavg()
    .map((l) => fmt(l, 1))
    .join(' ');
}

/**
 * CPU seconds (user + system) of a process, or of one of its threads, from /proc (Linux). The
 * fields after the parenthesised command name (which may hold spaces): utime is the 12th.
 */
export function cpuSeconds(pid: number, tid?: number): number {
  const stat = readFileSync(
    tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`,
    'utf8',
  );
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
}

/**
 * CPU seconds of every process on this machine named `comm` (a database server's processes), with
 * what their exited children used; undefined when there is none (a server elsewhere, or no /proc)
 * or no name is given.
 */
export function processesCpuSeconds(comm: string | undefined): number | undefined {
  if (comm === undefined) return undefined;
  let total: number | undefined;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== comm) continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    total =
      (total ?? 0) + (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / USER_HZ;
  }
  return total;
}

/** Clock ticks per second of /proc's CPU times on Linux. */
const USER_HZ = 100;
