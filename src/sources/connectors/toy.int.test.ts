import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeVariants } from '../../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../../auth/index.js';
import { loadConfig } from '../../config/index.js';
import { FakeClock } from '../../core/index.js';
import { createOutboundGuard } from '../../net/index.js';
import { openStore, type Store } from '../../store/index.js';
import { SourceService } from '../service.js';
import { ConnectorRegistry } from './registry.js';
import { toyConnector, toySource } from './toy.testkit.js';

/**
 * A connector declared by a test goes through the source apply path like a built-in one: its
 * schema and capabilities decide what the service accepts and stores.
 */
describe.each(storeVariants())('a declared connector through apply on $name', (variant) => {
  let store: Store;
  let dispose: () => Promise<void>;
  let dataDir: string;

  beforeEach(async () => {
    const opened = await variant.open();
    dispose = opened.dispose;
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-toy-connector-'));
    const config = loadConfig({ overrides: { data_dir: dataDir, ...opened.overrides } });
    store = await openStore(config, { clock: new FakeClock(0) });
  });
  afterEach(async () => {
    await store.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const service = (registry: ConnectorRegistry) =>
    new SourceService({
      store,
      clock: new FakeClock(0),
      guard: createOutboundGuard({
        allowHosts: ['127.0.0.1'],
        requireHttps: true,
        setting: 'sources.allow_hosts',
      }),
      grants: { check: () => undefined },
      supported: (type, v) => registry.find(type, v) !== undefined,
      connectors: registry,
      logger: { info: () => undefined },
    });

  it('refuses what its schema refuses and what its capabilities do not allow; stores the rest', async () => {
    const sources = service(new ConnectorRegistry([toyConnector(['list', 'fetch']).factory]));
    await expect(
      sources.apply(OPEN_PRINCIPAL, toySource({ locations: ['eu-1'] })),
    ).rejects.toMatchObject({
      code: 'SOURCE_INVALID',
      details: [{ path: 'spec.locations', message: 'toy reads exactly two regions' }],
    });
    await expect(
      sources.apply(OPEN_PRINCIPAL, toySource({ writeBack: { enabled: true } })),
    ).rejects.toMatchObject({
      code: 'SOURCE_INVALID',
      details: [{ path: 'spec.writeBack.enabled', message: 'connector toy does not write back' }],
    });
    expect(await store.sources.get('default', 'toy-source')).toBeUndefined();
    const applied = await sources.apply(OPEN_PRINCIPAL, toySource());
    expect(applied.created).toBe(true);
    expect((await store.sources.get('default', 'toy-source'))?.resource).toMatchObject({
      spec: { connector: 'toy', locations: ['eu-1', 'us-2'] },
    });
  });
});
