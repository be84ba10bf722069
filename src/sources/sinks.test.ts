import { describe, expect, it } from 'vitest';
import type { Attributes } from '../core/index.js';
import { feedbackStoreId, mlflowTraceIdIn, spanCarriers } from './sinks.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const OTHER = `tr-${'a'.repeat(32)}`;
const UC = `trace:/main.agents/${TRACE}`;
const carrying = (value: string): Attributes => ({ 'mlflow.traceRequestId': value });

describe('feedbackStoreId', () => {
  it('keeps the OpenTelemetry trace id for Phoenix and Langfuse', () => {
    expect(feedbackStoreId('phoenix', TRACE, OTHER)).toBe(TRACE);
    expect(feedbackStoreId('langfuse', TRACE, OTHER)).toBe(TRACE);
  });

  it("takes MLflow's own id when the trace names one, else tr-<trace id>", () => {
    expect(feedbackStoreId('mlflow', TRACE, UC)).toBe(UC);
    expect(feedbackStoreId('mlflow', TRACE)).toBe(`tr-${TRACE}`);
  });
});

describe('mlflowTraceIdIn', () => {
  it('reads mlflow.traceRequestId JSON-quoted (as MLflow writes it) or not', () => {
    expect(mlflowTraceIdIn([carrying(JSON.stringify(UC))])).toBe(UC);
    expect(mlflowTraceIdIn([{}, carrying(UC)])).toBe(UC);
    expect(mlflowTraceIdIn([carrying(OTHER)])).toBe(OTHER);
    expect(mlflowTraceIdIn([carrying(TRACE)])).toBe(TRACE);
  });

  it('takes the first usable one, passing over values that are not MLflow trace ids', () => {
    for (const value of ['', '"', '"../../experiments"', 'tr-short', `trace:/a/b/${TRACE}`]) {
      expect(mlflowTraceIdIn([carrying(value)])).toBeUndefined();
      expect(mlflowTraceIdIn([carrying(value), undefined, carrying(OTHER)])).toBe(OTHER);
    }
    expect(mlflowTraceIdIn([carrying(JSON.stringify(UC)), carrying(OTHER)])).toBe(UC);
  });
});

describe('spanCarriers', () => {
  const span = (spanId: string, parentSpanId: string, attributes: Attributes) => ({
    parentSpanId,
    attributes,
    resource: { 'service.name': spanId },
  });

  it("reads the root span first, each span's attributes before its resource", () => {
    const child = span('b', 'r', carrying(OTHER));
    const root = span('r', '', carrying(UC));
    expect(spanCarriers([child, root])).toEqual([
      root.attributes,
      root.resource,
      child.attributes,
      child.resource,
    ]);
    expect(mlflowTraceIdIn(spanCarriers([child, root]))).toBe(UC);
    // MLflow's spans under a root span of other instrumentation.
    expect(mlflowTraceIdIn(spanCarriers([child, span('r', '', {})]))).toBe(OTHER);
  });
});
