import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callJson, eventually } from '../support/process.js';
import {
  PHOENIX_PYTHON,
  PHOENIX_SKIP_REASON,
  type PhoenixServer,
  startPhoenixServer,
  traceAnnotations,
} from './phoenix/phoenix-server.js';
import {
  exportToBoth,
  scoredBeforeTheStoreHasIt,
  startTouchstone,
  type Touchstone,
} from './touchstone-server.js';

/**
 * The `trace_feedback` sink against a real Phoenix server: one agent trace exported over OTLP to
 * both Phoenix (its OTLP endpoint, into a project) and `touchstone serve`; the policy's scores
 * land on the Phoenix trace with the same OpenTelemetry trace id as trace annotations, read back
 * through Phoenix's REST API. Needs TOUCHSTONE_INTEROP_PHOENIX_PYTHON; skipped without it.
 */

const live = PHOENIX_PYTHON !== undefined;
const PROJECT = 'touchstone-sink';
const POLICY = 'agent-health';
const KEY_VAR = 'PHOENIX_SINK_API_KEY';

describe('trace_feedback sink against a live Phoenix server', () => {
  let phoenix: PhoenixServer | undefined;
  let touchstone: Touchstone | undefined;

  beforeAll(async () => {
    if (!live) return;
    phoenix = await startPhoenixServer(PHOENIX_PYTHON as string);
    touchstone = await startTouchstone(
      [
        'online: {poll_interval: 100ms}',
        'traces: {completion_grace: 1s}',
        "sources: {allow_hosts: ['127.0.0.1']}",
        `credentials: {grants: [{env: ${KEY_VAR}, projects: [default], hosts: ['127.0.0.1']}]}`,
      ],
      { [KEY_VAR]: phoenix.apiKey },
    );
  }, 240_000);
  afterAll(async () => {
    await touchstone?.stop();
    await phoenix?.stop();
  }, 60_000);

  it.skipIf(!live)(
    "writes a pushed trace's scores onto the same trace in Phoenix",
    async () => {
      const server = phoenix as PhoenixServer;
      const base = (touchstone as Touchstone).base;
      await callJson(base, 'POST', '/v1alpha1/policies', {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'OnlineEvalPolicy',
        metadata: { name: POLICY },
        spec: {
          stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
          sinks: [
            {
              type: 'trace_feedback',
              connector: 'phoenix',
              endpoint: server.base,
              locations: [PROJECT],
              credentials: { env: KEY_VAR },
            },
          ],
        },
      });
      const traceId = await exportToBoth(
        { url: `${server.base}/v1/traces`, headers: { authorization: `Bearer ${server.apiKey}` } },
        base,
        { 'openinference.project.name': PROJECT },
      );
      const annotations = await eventually(async () => {
        const found = await traceAnnotations(server, PROJECT, traceId).catch(() => []);
        return found.length > 0 ? found : undefined;
      }, 60_000);
      expect(annotations).toEqual([
        expect.objectContaining({
          name: 'tool-errors',
          annotator_kind: 'CODE',
          result: expect.objectContaining({ score: 1 }),
        }),
      ]);
    },
    180_000,
  );

  it.skipIf(!live)(
    'writes the scores of a trace Phoenix receives only after Touchstone scored it',
    async () => {
      const server = phoenix as PhoenixServer;
      const base = (touchstone as Touchstone).base;
      // The policy of the test above, with its sink, is still applied.
      const trace = await scoredBeforeTheStoreHasIt(base, {
        'openinference.project.name': PROJECT,
      });
      await trace.sendTo(`${server.base}/v1/traces`, { authorization: `Bearer ${server.apiKey}` });
      const annotations = await eventually(async () => {
        const found = await traceAnnotations(server, PROJECT, trace.traceId).catch(() => []);
        return found.length > 0 ? found : undefined;
      }, 120_000);
      expect(annotations.map((a) => a.name)).toEqual(['tool-errors']);
    },
    180_000,
  );

  it.skipIf(live)(`skipped: ${PHOENIX_SKIP_REASON}`, () => {});
});
