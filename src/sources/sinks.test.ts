import { describe, expect, it } from 'vitest';
import { feedbackStoreId } from './sinks.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const root = (attributes: Record<string, string>, resource: Record<string, string> = {}) => ({
  attributes,
  resource,
});

describe('feedbackStoreId', () => {
  it('keeps the OpenTelemetry trace id for Phoenix and Langfuse', () => {
    const r = root({ 'mlflow.traceRequestId': '"tr-0123"' });
    expect(feedbackStoreId('phoenix', TRACE, r)).toBe(TRACE);
    expect(feedbackStoreId('langfuse', TRACE, r)).toBe(TRACE);
  });

  it("takes MLflow's own id from the root span or its resource, JSON-quoted or not", () => {
    const uc = `trace:/main.agents/${TRACE}`;
    expect(feedbackStoreId('mlflow', TRACE, root({ 'mlflow.traceRequestId': `"${uc}"` }))).toBe(uc);
    expect(feedbackStoreId('mlflow', TRACE, root({}, { 'mlflow.traceRequestId': uc }))).toBe(uc);
    const other = `tr-${'a'.repeat(32)}`;
    expect(feedbackStoreId('mlflow', TRACE, root({ 'mlflow.traceRequestId': other }))).toBe(other);
  });

  it('falls back to tr-<trace id> without a usable mlflow.traceRequestId', () => {
    for (const value of ['', '"', '"../../experiments"', 'tr-short', `trace:/a/b/${TRACE}`]) {
      expect(feedbackStoreId('mlflow', TRACE, root({ 'mlflow.traceRequestId': value }))).toBe(
        `tr-${TRACE}`,
      );
    }
    expect(feedbackStoreId('mlflow', TRACE)).toBe(`tr-${TRACE}`);
  });
});
