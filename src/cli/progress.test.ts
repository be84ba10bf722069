import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BYTES, ProgressDisplay } from './progress.js';

function sink(tty: boolean) {
  let text = '';
  const out = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  }) as Writable & { isTTY?: boolean };
  out.isTTY = tty;
  return { out, text: () => text };
}

describe('progress display', () => {
  it('redraws one bar in place on a terminal, with rate and ETA', () => {
    let now = 0;
    const s = sink(true);
    const p = new ProgressDisplay(s.out, { now: () => now });
    p.update(0, 0, 'running');
    expect(s.text()).toBe('');
    p.update(0, 100, 'running');
    now = 10_000;
    p.update(50, 100, 'running');
    p.end();
    const frames = s.text().split('\r\x1b[K').filter(Boolean);
    expect(frames).toHaveLength(2);
    expect(frames[1]).toMatch(/^running █{12}░{12} 50\/100 items \(50%\) {2}5\/s {2}ETA 10s\n$/);
  });

  it('writes plain lines at most every few seconds otherwise, and the last one', () => {
    let now = 0;
    const s = sink(false);
    const p = new ProgressDisplay(s.out, { now: () => now, plainEveryMs: 5_000 });
    p.update(1, 10, 'running');
    now = 1_000;
    p.update(2, 10, 'running');
    now = 6_000;
    p.update(6, 10, 'running');
    now = 7_000;
    p.update(10, 10, 'succeeded');
    p.end();
    expect(s.text().split('\n').filter(Boolean)).toEqual([
      'progress: 1/10 items (10%)  -/s  ETA -',
      'progress: 6/10 items (60%)  0.8/s  ETA 5s',
      'progress: 10/10 items (100%)  1.3/s  ETA -',
    ]);
    expect(s.text()).not.toContain('\r');
  });
});

describe('progress display in bytes', () => {
  it('stays quiet off a terminal for work shorter than the first interval', () => {
    let now = 0;
    const s = sink(false);
    const p = new ProgressDisplay(s.out, { unit: BYTES, now: () => now, plainFirstAfterMs: 5_000 });
    p.update(0, 2 * 1024 * 1024, 'uploading');
    now = 1_000;
    p.update(2 * 1024 * 1024, 2 * 1024 * 1024, 'uploading');
    p.end();
    expect(s.text()).toBe('');
  });

  it('reports a long upload every few seconds, and its end', () => {
    let now = 0;
    const s = sink(false);
    const total = 40 * 1024 * 1024;
    const p = new ProgressDisplay(s.out, { unit: BYTES, now: () => now, plainFirstAfterMs: 5_000 });
    p.update(0, total, 'uploading');
    now = 5_000;
    p.update(10 * 1024 * 1024, total, 'uploading');
    now = 7_000;
    p.update(20 * 1024 * 1024, total, 'uploading');
    now = 10_000;
    p.update(total, total, 'uploading');
    expect(s.text().split('\n').filter(Boolean)).toEqual([
      'progress: 10.0/40.0 MiB (25%)  2.0 MiB/s  ETA 15s',
      'progress: 40.0/40.0 MiB (100%)  4.0 MiB/s  ETA -',
    ]);
  });

  it('draws bytes sent of the total on a terminal', () => {
    let now = 0;
    const s = sink(true);
    const p = new ProgressDisplay(s.out, { unit: BYTES, now: () => now });
    p.update(0, 8 * 1024 * 1024, 'uploading');
    now = 2_000;
    p.update(4 * 1024 * 1024, 8 * 1024 * 1024, 'uploading');
    p.end();
    const frames = s.text().split('\r\x1b[K').filter(Boolean);
    expect(frames[1]).toBe(
      `uploading ${'█'.repeat(12)}${'░'.repeat(12)} 4.0/8.0 MiB (50%)  2.0 MiB/s  ETA 2s\n`,
    );
  });
});
