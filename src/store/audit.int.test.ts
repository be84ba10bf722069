import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type StoreTarget, storeVariants, variantTarget } from '../../test/support/stores.js';
import { FakeClock } from '../core/index.js';
import type { AuditEntry, Store } from './index.js';

const T0 = Date.parse('2026-03-01T00:00:00Z');

function entry(n: number, patch: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: `aud_${String(n).padStart(4, '0')}`,
    at: new Date(T0 + n * 1000).toISOString(),
    principal: 'key_a',
    principalKind: 'key',
    action: 'POST /v1alpha1/policies',
    resource: '/v1alpha1/policies',
    project: 'p1',
    outcome: 'ok',
    status: 200,
    requestId: `req-${n}`,
    ...patch,
  };
}

for (const variant of storeVariants()) {
  describe(`audit store on ${variant.name}`, () => {
    let store: Store;
    let target: StoreTarget;

    beforeEach(async () => {
      target = await variantTarget(variant, 'touchstone-audit-store-');
      store = await target.open(new FakeClock(T0));
    });
    afterEach(async () => {
      await store.close();
      await target.cleanup();
    });

    it('lists newest first, filtered, paged without gaps or repeats', async () => {
      const denied = entry(3, {
        principal: '',
        principalKind: 'anonymous',
        outcome: 'denied',
        status: 401,
        code: 'UNAUTHENTICATED',
      });
      const { project: _, ...noProject } = entry(4, { action: 'DELETE /v1alpha1/keys/:id' });
      await store.audit.append([entry(1), entry(2, { project: 'p2' }), denied, noProject]);
      const all = await store.audit.list({}, { pageSize: 10 });
      expect(all.items.map((e) => e.id)).toEqual(['aud_0004', 'aud_0003', 'aud_0002', 'aud_0001']);
      expect(all.items[1]).toEqual(denied);
      expect(all.items[0]?.project).toBeUndefined();
      expect((await store.audit.list({ project: 'p1' }, { pageSize: 10 })).items).toHaveLength(2);
      const withUnscoped = await store.audit.list(
        { project: 'p2', orNoProject: true },
        { pageSize: 10 },
      );
      expect(withUnscoped.items.map((e) => e.id)).toEqual(['aud_0004', 'aud_0002']);
      const refused = await store.audit.list({ outcome: 'denied' }, { pageSize: 10 });
      expect(refused.items.map((e) => e.id)).toEqual(['aud_0003']);
      const byAction = await store.audit.list(
        { action: 'DELETE /v1alpha1/keys/:id' },
        { pageSize: 10 },
      );
      expect(byAction.items.map((e) => e.id)).toEqual(['aud_0004']);
      const window = await store.audit.list(
        { since: entry(2).at, until: entry(4).at },
        { pageSize: 10 },
      );
      expect(window.items.map((e) => e.id)).toEqual(['aud_0003', 'aud_0002']);
      const seen: string[] = [];
      let token: string | undefined;
      do {
        const page = await store.audit.list(
          {},
          { pageSize: 3, ...(token === undefined ? {} : { pageToken: token }) },
        );
        seen.push(...page.items.map((e) => e.id));
        token = page.nextPageToken;
      } while (token !== undefined);
      expect(seen).toEqual(['aud_0004', 'aud_0003', 'aud_0002', 'aud_0001']);
    });

    it('deletes entries older than a time, oldest first, up to a limit', async () => {
      await store.audit.append([1, 2, 3, 4, 5].map((n) => entry(n)));
      expect(await store.audit.deleteBefore(T0 + 4500, 2)).toBe(2);
      expect(await store.audit.deleteBefore(T0 + 4500, 10)).toBe(2);
      const left = await store.audit.list({}, { pageSize: 10 });
      expect(left.items.map((e) => e.id)).toEqual(['aud_0005']);
    });
  });
}
