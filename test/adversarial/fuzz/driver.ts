/**
 * The fuzz driver: a target generates an input from the seeded generator, runs it, and checks
 * what came back; the driver counts outcomes and mutations, times every run, and stops at the
 * first broken rule with a reproducer. A run slower than `hangMs` on a busy machine may be a GC
 * pause or the scheduler, so the slowest are timed again alone at the end (best of 3, the lesser
 * of wall and CPU time); one still over the bound is a hang.
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Rand, rng } from './random.js';

/** What one run of a target gave. */
export interface Trial {
  /** Counted; `group: name` (`protobuf traces: decoded`) is printed grouped. */
  outcome: string;
  /** The rule the input broke, said without quoting it; the driver stops there. */
  failure?: string;
  /** Summed over the run (`protobuf traces: spans kept`). */
  figures?: Readonly<Record<string, number>>;
}

export interface FuzzTarget<I> {
  readonly name: string;
  /** Iteration `i` of a seed: the generator is the only source of randomness. */
  generate(r: Rand, iteration: number): { input: I; mutation: string };
  /** Never throws: an exception the code under test must not raise is a `failure`. */
  run(input: I): Trial | Promise<Trial>;
  /** What a reproducer needs besides its bytes (the decoder, options, the full mutation chain). */
  describe(input: I): string;
  bytes(input: I): Uint8Array;
}

export interface FuzzOptions {
  /** The most iterations (generated, counting those before `from`). */
  iterations: number;
  /** Stops after the first iteration that ends past this many seconds (the long fuzz). */
  seconds?: number;
  seed: number;
  /** Runs only iterations from this one on (the earlier ones are generated, not run): a rerun. */
  from?: number;
  /**
   * A run slower than this (ms), alone, best of 3 and the lesser of wall and CPU time, is a hang.
   * Default 250: the cases take a few ms, the costliest accepted ones (a 16 KiB YAML text of
   * 2000 documents) about 100 ms on a loaded machine.
   */
  hangMs?: number;
  /** Receives a progress line every 30 s (long runs). */
  progress?: (line: string) => void;
}

export interface FuzzReport {
  target: string;
  seed: number;
  /** Iterations run (all of them, unless a failure stopped the run). */
  iterations: number;
  seconds: number;
  cpuSeconds: number;
  outcomes: Record<string, number>;
  mutations: Record<string, number>;
  figures: Record<string, number>;
  maxMs: number;
  /** Runs over `hangMs` in the loop, and the slowest of those re-timed alone. */
  slow: number;
  retimed: number;
  retimedMs: number;
  heapStart: number;
  heapEnd: number;
  /** Whether the heap figures are after a full collection (`--expose-gc`). */
  heapAfterGc: boolean;
}

/** Reproducers up to this size are printed in the message; larger ones go to a file. */
const MAX_PRINTED_REPRODUCER = 64 * 1024;
/** Slow runs kept for re-timing (the slowest). */
const MAX_SUSPECTS = 100;

export class FuzzFailure extends Error {
  constructor(
    readonly report: FuzzReport,
    readonly iteration: number,
    /** The input, base64. */
    readonly reproducer: string,
    why: string,
    about: string,
  ) {
    let shown = reproducer;
    if (reproducer.length > MAX_PRINTED_REPRODUCER) {
      const file = join(
        tmpdir(),
        `touchstone-fuzz-${report.target}-${report.seed}-${iteration}.base64`,
      );
      writeFileSync(file, reproducer);
      shown = `${reproducer.length} characters, written to ${file}`;
    }
    super(
      `fuzz ${report.target}, seed ${report.seed}: iteration ${iteration} (${about}): ${why}\n` +
        `reproducer (base64): ${shown}\n` +
        `rerun: npm run bench -- fuzz --targets=${report.target} --seed=${report.seed} ` +
        `--from=${iteration} --iterations=${iteration + 1}\n${formatReport(report)}`,
    );
    this.name = 'FuzzFailure';
  }
}

interface Suspect<I> {
  input: I;
  iteration: number;
  ms: number;
}

const add = (into: Record<string, number>, key: string, n = 1) => {
  into[key] = (into[key] ?? 0) + n;
};

/** Best of 3 runs alone, each the lesser of wall and CPU time (ms). */
async function retime<I>(target: FuzzTarget<I>, input: I): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  for (let k = 0; k < 3; k++) {
    const cpu = process.cpuUsage();
    const t = performance.now();
    await target.run(input);
    const wall = performance.now() - t;
    const used = process.cpuUsage(cpu);
    best = Math.min(best, wall, (used.user + used.system) / 1000);
  }
  return best;
}

/**
 * One run and its time (ms). An async run is followed by a turn of the event loop, so a
 * rejection it left unhandled is reported before the next input, not later.
 */
async function timed<I>(target: FuzzTarget<I>, input: I): Promise<{ trial: Trial; ms: number }> {
  const t = performance.now();
  const out = target.run(input);
  if (!(out instanceof Promise)) return { trial: out, ms: performance.now() - t };
  const trial = await out;
  const ms = performance.now() - t;
  await new Promise((resolve) => setImmediate(resolve));
  return { trial, ms };
}

/** Runs `target` for `options.iterations` inputs; throws FuzzFailure at a broken rule or a hang. */
export async function fuzz<I>(target: FuzzTarget<I>, options: FuzzOptions): Promise<FuzzReport> {
  const hangMs = options.hangMs ?? 250;
  const r = rng(options.seed);
  // With --expose-gc the heap figures are after a full collection, so growth means retention.
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const report: FuzzReport = {
    target: target.name,
    seed: options.seed,
    iterations: 0,
    seconds: 0,
    cpuSeconds: 0,
    outcomes: {},
    mutations: {},
    figures: {},
    maxMs: 0,
    slow: 0,
    retimed: 0,
    retimedMs: 0,
    heapStart: process.memoryUsage().heapUsed,
    heapEnd: 0,
    heapAfterGc: gc !== undefined,
  };
  const cpuStart = process.cpuUsage();
  const started = performance.now();
  const finish = () => {
    report.seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuStart);
    report.cpuSeconds = (cpu.user + cpu.system) / 1e6;
  };
  const fail = (input: I, iteration: number, why: string) => {
    finish();
    const bytes = Buffer.from(target.bytes(input)).toString('base64');
    return new FuzzFailure(report, iteration, bytes, why, target.describe(input));
  };

  const suspects: Suspect<I>[] = [];
  let lastReport = started;
  // A promise the code under test left rejected with no one waiting ends the server process.
  const escaped: unknown[] = [];
  const onRejection = (reason: unknown) => escaped.push(reason);
  process.on('unhandledRejection', onRejection);
  try {
    for (let i = 0; i < options.iterations; i++) {
      const { input, mutation } = target.generate(r, i);
      if (i < (options.from ?? 0)) continue;
      add(report.mutations, mutation);
      const t = performance.now();
      let trial: Trial;
      let ms: number;
      try {
        ({ trial, ms } = await timed(target, input));
      } catch (err) {
        throw fail(input, i, `the target threw ${err instanceof Error ? err.stack : String(err)}`);
      }
      report.iterations++;
      if (escaped.length > 0) {
        const reason = escaped[0] instanceof Error ? escaped[0].stack : String(escaped[0]);
        throw fail(
          input,
          i,
          `a rejected promise no one waited for (it ends the process): ${reason}`,
        );
      }
      if (trial.failure !== undefined) throw fail(input, i, trial.failure);
      add(report.outcomes, trial.outcome);
      for (const [k, n] of Object.entries(trial.figures ?? {})) add(report.figures, k, n);
      if (ms > report.maxMs) report.maxMs = ms;
      if (ms > hangMs) {
        report.slow++;
        keepSlowest(suspects, { input, iteration: i, ms });
      }
      if (options.seconds !== undefined && t - started > options.seconds * 1000) break;
      if (options.progress !== undefined && t - lastReport > 30_000) {
        lastReport = t;
        const rate = ((i + 1) * 1000) / (t - started);
        options.progress(`  … ${target.name}: ${i + 1} iterations, ${rate.toFixed(0)}/s`);
      }
    }
  } finally {
    process.off('unhandledRejection', onRejection);
  }
  finish();

  let hang: Suspect<I> | undefined;
  for (const s of suspects) {
    const best = await retime(target, s.input);
    report.retimed++;
    report.retimedMs = Math.max(report.retimedMs, best);
    if (best > hangMs && hang === undefined) hang = s;
  }
  gc?.();
  report.heapEnd = process.memoryUsage().heapUsed;
  if (hang !== undefined) {
    throw fail(hang.input, hang.iteration, `takes over ${hangMs} ms every time (hang)`);
  }
  return report;
}

function keepSlowest<I>(suspects: Suspect<I>[], s: Suspect<I>): void {
  if (suspects.length < MAX_SUSPECTS) {
    suspects.push(s);
    return;
  }
  let fastest = 0;
  for (let k = 1; k < suspects.length; k++) {
    if (suspects[k]!.ms < suspects[fastest]!.ms) fastest = k;
  }
  if (suspects[fastest]!.ms < s.ms) suspects[fastest] = s;
}

/** `group: name` counts as one line per group: `protobuf traces: decoded 12, OTLP_DECODE_FAILED 3`. */
function grouped(counts: Record<string, number>): string[] {
  const groups = new Map<string, string[]>();
  for (const key of Object.keys(counts).sort()) {
    const colon = key.indexOf(': ');
    const group = colon < 0 ? '' : key.slice(0, colon);
    const list = groups.get(group) ?? [];
    list.push(`${colon < 0 ? key : key.slice(colon + 2)} ${counts[key]}`);
    groups.set(group, list);
  }
  return [...groups].map(([g, items]) => `${g === '' ? '' : `${g}: `}${items.join(', ')}`);
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** The figures of a run, as the bench prints them and a failure reports them. */
export function formatReport(report: FuzzReport): string {
  const rate = report.iterations / Math.max(report.seconds, 1e-9);
  return [
    `${report.target}: ${report.iterations} iterations in ${report.seconds.toFixed(1)} s ` +
      `(${rate.toFixed(0)}/s; CPU ${report.cpuSeconds.toFixed(1)} s), seed ${report.seed}`,
    ...grouped(report.outcomes).map((l) => `  outcomes ${l}`),
    ...grouped(report.figures).map((l) => `  figures ${l}`),
    ...grouped(report.mutations).map((l) => `  mutations ${l}`),
    `  max time per iteration: ${report.maxMs.toFixed(1)} ms; ${report.slow} over the bound, ` +
      `slowest of ${report.retimed} re-timed alone: ${report.retimedMs.toFixed(1)} ms`,
    `  heap used: start ${mib(report.heapStart)}, end ${mib(report.heapEnd)}` +
      (report.heapAfterGc ? ' (after full GC)' : ' (no --expose-gc: figures include garbage)'),
  ].join('\n');
}
