import { describe, expect, it } from 'vitest';
import type { Span } from '../core/index.js';
import { normalizeStoredTrace } from './index.js';

const span = (attributes: Span['attributes']): Span => ({
  traceId: 'a'.repeat(32),
  spanId: 'b'.repeat(16),
  parentSpanId: '',
  name: 'log',
  kind: 1,
  startTimeUnixNano: '1767225600000000000',
  endTimeUnixNano: '1767225600000000000',
  attributes,
  events: [],
  links: [],
  status: { code: 0, message: '' },
  resource: { 'service.name': 'svc', blob: new Uint8Array([1, 2, 3]) },
  scope: { name: 's', version: '1' },
});

const pending = { project: 'p', traceId: 'a'.repeat(32), lastSpanAt: 0, labels: {}, source: '' };

describe('normalizeStoredTrace', () => {
  it("keeps the root's attributes and resource, bytes as base64 text (nested too)", () => {
    const { root } = normalizeStoredTrace(
      [span({ 'touchstone.record.output': '"x"', nested: { raw: new Uint8Array([255]) } })],
      pending,
    );
    expect(root).toEqual({
      attributes: { 'touchstone.record.output': '"x"', nested: { raw: '/w==' } },
      resource: { 'service.name': 'svc', blob: 'AQID' },
    });
    expect(JSON.parse(JSON.stringify(root))).toEqual(root);
  });
});
