import { randomBytes } from 'node:crypto';

let lastMs = -1;
let sequence = 0;

/**
 * `whd_` + 12 hex digits of epoch ms + 4 of a per-millisecond sequence + 16 random: ids sort in
 * creation order within a process (the dispatcher sends oldest first, and `run.gate_failed`
 * follows `run.finished` emitted in the same call) and stay unique across replicas.
 */
export function newDeliveryId(nowMs: number): string {
  if (nowMs === lastMs) sequence = (sequence + 1) & 0xffff;
  else {
    lastMs = nowMs;
    sequence = 0;
  }
  const time = Math.max(0, Math.floor(nowMs)).toString(16).padStart(12, '0').slice(-12);
  return `whd_${time}${sequence.toString(16).padStart(4, '0')}${randomBytes(8).toString('hex')}`;
}
