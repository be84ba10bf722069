/**
 * The words of a trace source's pull, owned by sources: the store records them and learns them
 * from here.
 * A leaf: it imports nothing, so the store can import it without a cycle
 * (dependency-cruiser checks both).
 */

/** What a source is doing: catching up to its start, following new traces, paused, or failing. */
export const SOURCE_PHASES = ['backfilling', 'tailing', 'paused', 'error'] as const;

export type SourcePhase = (typeof SOURCE_PHASES)[number];
