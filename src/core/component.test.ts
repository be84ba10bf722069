import { describe, expect, it } from 'vitest';
import { type Component, component, startAll, stopAll } from './component.js';

/** Components that write `start:<name>` / `stop:<name>` into `log` when their steps run. */
function recording(names: string[], log: string[], failing: Record<string, 'start' | 'stop'> = {}) {
  return names.map((name) =>
    component(name, {
      start: () => {
        log.push(`start:${name}`);
        if (failing[name] === 'start') throw new Error(`${name} cannot start`);
      },
      stop: () => {
        log.push(`stop:${name}`);
        if (failing[name] === 'stop') throw new Error(`${name} cannot stop`);
      },
    }),
  );
}

describe('component', () => {
  it('stops once however often stop() is called, and stop before start still runs its step', async () => {
    const log: string[] = [];
    const [c] = recording(['store'], log) as [Component];
    await Promise.all([c.stop(), c.stop()]);
    await c.stop();
    expect(log).toEqual(['stop:store']);
  });

  it('starts once, and not at all after stop (a shutdown during startup wins)', async () => {
    const log: string[] = [];
    const [c] = recording(['loop'], log) as [Component];
    await Promise.all([c.start(), c.start()]);
    await c.stop();
    await c.start();
    expect(log).toEqual(['start:loop', 'stop:loop']);
  });

  it('waits for a start in progress before stopping', async () => {
    const log: string[] = [];
    let listening: () => void = () => {};
    const c = component('server', {
      start: () =>
        new Promise<void>((r) => {
          listening = () => {
            log.push('listening');
            r();
          };
        }),
      stop: () => log.push('closed'),
    });
    const started = c.start();
    const stopped = c.stop();
    await new Promise((r) => setTimeout(r, 5));
    expect(log).toEqual([]);
    listening();
    await Promise.all([started, stopped]);
    expect(log).toEqual(['listening', 'closed']);
  });

  it('needs neither step', async () => {
    const c = component('nothing', {});
    await c.start();
    await c.stop();
  });
});

describe('startAll / stopAll', () => {
  it('start in list order and stop in reverse', async () => {
    const log: string[] = [];
    const list = recording(['store', 'webhooks', 'engine', 'server'], log);
    await startAll(list);
    await stopAll(list);
    expect(log).toEqual([
      'start:store',
      'start:webhooks',
      'start:engine',
      'start:server',
      'stop:server',
      'stop:engine',
      'stop:webhooks',
      'stop:store',
    ]);
  });

  it('stop every component when one fails to stop, then throw the first error', async () => {
    const log: string[] = [];
    const list = recording(['store', 'engine', 'runs', 'server'], log, {
      runs: 'stop',
      engine: 'stop',
    });
    await expect(stopAll(list)).rejects.toThrow('runs cannot stop');
    expect(log).toEqual(['stop:server', 'stop:runs', 'stop:engine', 'stop:store']);
  });

  it('stop everything when one fails to start, then throw its error', async () => {
    const log: string[] = [];
    const list = recording(['store', 'engine', 'server'], log, { server: 'start' });
    await expect(startAll(list)).rejects.toThrow('server cannot start');
    expect(log).toEqual([
      'start:store',
      'start:engine',
      'start:server',
      'stop:server',
      'stop:engine',
      'stop:store',
    ]);
  });
});
