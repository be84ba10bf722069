import { describe, expect, it } from 'vitest';
import { SourceErrors } from '../sources/index.js';
import { apiDocument, type CustomResource, FINALIZER, KINDS, serverPath } from './kinds.js';
import { claim } from './leader.js';
import {
  backoffMs,
  changedForUs,
  failed,
  nextStep,
  readyOf,
  secretMissing,
  sourcesNaming,
  statusPatch,
  synced,
} from './reconcile.js';

const NOW = '2026-11-27T12:00:00.000Z';
const LATER = '2026-11-27T12:05:00.000Z';

function cr(
  kind: string,
  over: Partial<CustomResource['metadata']> = {},
  spec = {},
): CustomResource {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind,
    metadata: {
      name: 'prod',
      namespace: 'support',
      uid: 'u1',
      generation: 1,
      labels: { 'touchstone.dev/project': 'support' },
      finalizers: [FINALIZER],
      ...over,
    },
    spec,
  };
}

describe('nextStep', () => {
  it('puts the finalizer on before anything reaches the server (not on an EvalRun)', () => {
    expect(nextStep(KINDS.TraceSource, cr('TraceSource', { finalizers: [] }))).toBe(
      'add-finalizer',
    );
    expect(nextStep(KINDS.Webhook, cr('Webhook', { finalizers: undefined }))).toBe('add-finalizer');
    expect(nextStep(KINDS.EvalRun, cr('EvalRun', { finalizers: [] }))).toBe('apply');
  });

  it('finalizes a deleted resource holding our finalizer, and ignores one without it', () => {
    const deleting = { deletionTimestamp: NOW };
    expect(nextStep(KINDS.TraceSource, cr('TraceSource', deleting))).toBe('finalize');
    expect(
      nextStep(KINDS.TraceSource, cr('TraceSource', { ...deleting, finalizers: ['other'] })),
    ).toBe('ignore');
  });

  it('applies a new generation or a resource not Ready; only refreshes the status otherwise', () => {
    const source = cr('TraceSource');
    expect(nextStep(KINDS.TraceSource, source)).toBe('apply');
    const applied = synced(KINDS.TraceSource, source, { status: { phase: 'tailing' } }, NOW);
    const current = { ...source, status: applied.status };
    expect(nextStep(KINDS.TraceSource, current)).toBe('refresh');
    expect(
      nextStep(KINDS.TraceSource, { ...current, metadata: { ...current.metadata, generation: 2 } }),
    ).toBe('apply');
    const down = failed(current, { type: 'unreachable', message: 'ECONNREFUSED' }, NOW);
    expect(nextStep(KINDS.TraceSource, { ...current, status: down.status })).toBe('apply');
  });

  it('applies a Webhook at every look (its Secret may have been rotated)', () => {
    const hook = cr('Webhook');
    const current = {
      ...hook,
      status: synced(KINDS.Webhook, hook, { secretSet: true }, NOW).status,
    };
    expect(nextStep(KINDS.Webhook, current)).toBe('apply');
  });

  it('creates an EvalRun once, then follows its run; a changed spec is refused as immutable', () => {
    const run = cr('EvalRun', { finalizers: [] });
    expect(nextStep(KINDS.EvalRun, run)).toBe('apply');
    const created = {
      ...run,
      status: synced(KINDS.EvalRun, run, { id: 'run_1', status: 'RUN_STATUS_PENDING' }, NOW).status,
    };
    expect(nextStep(KINDS.EvalRun, created)).toBe('refresh');
    expect(
      nextStep(KINDS.EvalRun, { ...created, metadata: { ...created.metadata, generation: 2 } }),
    ).toBe('immutable');
  });
});

describe('status mirroring', () => {
  it('mirrors a source status: counts, watermark, lag, lastScheduled; Ready with observedGeneration', () => {
    const source = cr('TraceSource', { generation: 3 });
    const view = {
      status: {
        phase: 'tailing',
        lagSeconds: 12,
        recordsPerSecond: 1.5,
        watermark: NOW,
        deferred: 0,
        pulled: 40,
        scored: 38,
        deadLetters: 0,
        lastScheduledAt: NOW,
        lastRunId: 'run_9',
        missedWindows: 0,
        lastDeadLetters: [{ traceId: 't' }],
      },
    };
    const out = synced(KINDS.TraceSource, source, view, NOW);
    expect(out.status).toMatchObject({
      phase: 'tailing',
      pulled: 40,
      scored: 38,
      watermark: NOW,
      lagSeconds: 12,
      lastScheduled: NOW,
      lastRunId: 'run_9',
      observedGeneration: 3,
    });
    expect(out.status).not.toHaveProperty('lastDeadLetters');
    expect(out.status.conditions).toEqual([
      {
        type: 'Ready',
        status: 'True',
        reason: 'Synced',
        message: 'applied to the server as TraceSource',
        lastTransitionTime: NOW,
        observedGeneration: 3,
      },
    ]);
    expect(out.event).toMatchObject({ type: 'Normal', reason: 'Synced' });
    expect(out.next).toBe('poll');
  });

  it('maps run statuses to the custom-resource phases and counts gates', () => {
    const run = cr('EvalRun');
    const phases = ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED', 'RUNNING', 'PENDING'].map(
      (s) => synced(KINDS.EvalRun, run, { id: 'r', status: `RUN_STATUS_${s}` }, NOW).status.phase,
    );
    expect(phases).toEqual(['Succeeded', 'Failed', 'Error', 'Cancelled', 'Running', 'Pending']);
    const out = synced(
      KINDS.EvalRun,
      run,
      {
        id: 'run_1',
        status: 'RUN_STATUS_FAILED',
        finishedAt: NOW,
        gates: [
          { gate: { metric: 'exact-match', min: 0.6 }, passed: true, value: 0.75 },
          { gate: { metric: 'latency', max: 2 }, passed: false, value: 3 },
        ],
      },
      NOW,
    );
    expect(out.status).toMatchObject({
      runId: 'run_1',
      phase: 'Failed',
      gatesPassed: 1,
      gatesTotal: 2,
      finishedAt: NOW,
      gates: [
        { gate: 'exact-match >= 0.6', passed: true, value: 0.75 },
        { gate: 'latency <= 2', passed: false, value: 3 },
      ],
    });
    expect(out.next).toBe('resync');
    expect(synced(KINDS.EvalRun, run, { id: 'r', status: 'RUN_STATUS_RUNNING' }, NOW).next).toBe(
      'poll',
    );
  });

  it('counts firing alerts of a policy', () => {
    const out = synced(
      KINDS.OnlineEvalPolicy,
      cr('OnlineEvalPolicy'),
      {
        status: {
          alerts: [
            { metric: 'a', firing: true, mean: 0.5, n: 20, changedAt: NOW },
            { metric: 'b', firing: false },
          ],
        },
      },
      NOW,
    );
    expect(out.status).toMatchObject({
      alertsFiring: 1,
      alerts: [
        { metric: 'a', firing: true },
        { metric: 'b', firing: false },
      ],
    });
  });

  it('keeps the transition time while Ready stays the same, and emits Synced only on a change', () => {
    const source = cr('TraceSource');
    const first = synced(KINDS.TraceSource, source, {}, NOW);
    const again = synced(KINDS.TraceSource, { ...source, status: first.status }, {}, LATER);
    expect(readyOf({ ...source, status: again.status })?.lastTransitionTime).toBe(NOW);
    expect(again.event).toBeUndefined();
  });

  it('writes a merge patch: changed fields, null for fields gone, nothing when equal', () => {
    expect(
      statusPatch({ phase: 'error', lastError: 'x', pulled: 1 }, { phase: 'tailing', pulled: 1 }),
    ).toEqual({
      phase: 'tailing',
      lastError: null,
    });
    expect(statusPatch({ pulled: 1 }, { pulled: 1 })).toEqual({});
    expect(statusPatch(undefined, { pulled: 1 })).toEqual({ pulled: 1 });
  });
});

describe('failures', () => {
  const source = cr('TraceSource');

  it('an unreachable server: Ready False ServerUnreachable, backoff, a warning once', () => {
    const out = failed(
      source,
      { type: 'unreachable', message: 'connect ECONNREFUSED 127.0.0.1:1' },
      NOW,
    );
    expect(readyOf({ ...source, status: out.status })).toMatchObject({
      status: 'False',
      reason: 'ServerUnreachable',
      message: 'cannot reach the Touchstone server: connect ECONNREFUSED 127.0.0.1:1',
    });
    expect(out.next).toBe('backoff');
    expect(out.event).toMatchObject({ type: 'Warning', reason: 'ServerUnreachable' });
    const again = failed(
      { ...source, status: out.status },
      { type: 'unreachable', message: 'connect ECONNREFUSED 127.0.0.1:1' },
      LATER,
    );
    expect(again.event).toBeUndefined();
  });

  it('keeps the mirrored status while failing', () => {
    const ok = synced(KINDS.TraceSource, source, { status: { pulled: 7 } }, NOW);
    const out = failed(
      { ...source, status: ok.status },
      { type: 'refused', status: 503, message: 'down' },
      LATER,
    );
    expect(out.status).toMatchObject({ pulled: 7 });
    expect(readyOf({ ...source, status: out.status })?.reason).toBe('ServerError');
  });

  it('a policy not found yet: PolicyNotFound with a warning, retried', () => {
    const out = failed(
      source,
      {
        type: 'refused',
        status: 404,
        code: SourceErrors.SOURCE_POLICY_NOT_FOUND.code,
        message: 'policy x does not exist',
      },
      NOW,
    );
    expect(out.event).toMatchObject({ type: 'Warning', reason: 'PolicyNotFound' });
    expect(out.next).toBe('backoff');
  });

  it('a refusal of the spec waits for a change; auth failures are retried', () => {
    expect(
      failed(source, { type: 'refused', status: 400, code: 'SOURCE_INVALID', message: 'bad' }, NOW)
        .next,
    ).toBe('resync');
    // 501: a connector not built in this version; retrying changes nothing.
    expect(
      failed(
        source,
        { type: 'refused', status: 501, code: 'SOURCE_NOT_SUPPORTED_YET', message: 'later' },
        NOW,
      ).next,
    ).toBe('resync');
    expect(failed(source, { type: 'refused', status: 401, message: 'no key' }, NOW)).toMatchObject({
      next: 'backoff',
    });
    expect(
      readyOf({
        ...source,
        status: failed(source, { type: 'refused', status: 403, message: 'no' }, NOW).status,
      })?.reason,
    ).toBe('Forbidden');
  });

  it('a missing Secret or key: SecretMissing naming the Secret, never a value', () => {
    const hook = cr('Webhook');
    const ref = { name: 'ci-webhook', key: 'secret' };
    expect(readyOf({ ...hook, status: secretMissing(hook, ref, false, NOW).status })).toMatchObject(
      {
        reason: 'SecretMissing',
        message: 'Secret support/ci-webhook does not exist',
      },
    );
    expect(secretMissing(hook, ref, true, NOW).event?.message).toBe(
      'Secret support/ci-webhook has no key secret',
    );
  });

  it('backs off per object: doubling from the base, capped', () => {
    expect([1, 2, 3, 4, 10].map((n) => backoffMs(n, 1000, 5000))).toEqual([
      1000, 2000, 4000, 5000, 5000,
    ]);
  });
});

describe('documents and paths', () => {
  it('sends the API its declarative form: the Webhook secret from the Secret, not the reference', () => {
    const hook = cr(
      'Webhook',
      {},
      {
        url: 'https://ci.example.com/h',
        events: ['run.finished'],
        secretRef: { name: 's', key: 'k' },
      },
    );
    expect(apiDocument(KINDS.Webhook, hook, 'sixteen-characters!')).toEqual({
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'Webhook',
      metadata: { name: 'prod', labels: { 'touchstone.dev/project': 'support' } },
      spec: {
        url: 'https://ci.example.com/h',
        events: ['run.finished'],
        secret: 'sixteen-characters!',
      },
    });
    expect(apiDocument(KINDS.EvalRun, cr('EvalRun')).kind).toBe('Run');
  });

  it('names the project of the label on the server path', () => {
    expect(serverPath(KINDS.TraceSource, cr('TraceSource'))).toBe(
      'v1alpha1/sources/prod?project=support',
    );
    expect(
      serverPath(KINDS.EvalRun, cr('EvalRun', { labels: {} }), 'run_1', { view: 'basic' }),
    ).toBe('v1alpha1/runs/run_1?view=basic');
  });

  it('reconciles on spec, label, finalizer or deletion changes, not on a status write', () => {
    const a = cr('TraceSource');
    expect(changedForUs(undefined, a)).toBe(true);
    expect(changedForUs(a, { ...a, status: { pulled: 3 } })).toBe(false);
    expect(changedForUs(a, { ...a, metadata: { ...a.metadata, generation: 2 } })).toBe(true);
    expect(changedForUs(a, { ...a, metadata: { ...a.metadata, finalizers: [] } })).toBe(true);
    expect(changedForUs(a, { ...a, metadata: { ...a.metadata, deletionTimestamp: NOW } })).toBe(
      true,
    );
  });

  it('retries the sources of the namespace that name a policy', () => {
    const policy = cr('OnlineEvalPolicy', { name: 'quality' });
    const naming = cr('TraceSource', { name: 'a' }, { policies: ['quality'] });
    const other = cr('TraceSource', { name: 'b', namespace: 'else' }, { policies: ['quality'] });
    expect(sourcesNaming([naming, other, cr('TraceSource')], policy)).toEqual([naming]);
  });
});

describe('leader lease', () => {
  it('takes a free or lapsed lease, renews its own, and waits while another holds a current one', () => {
    const fresh = claim(undefined, 'a', 15_000, 1000);
    expect(fresh).toEqual({ holder: 'a', durationSeconds: 15, renewedAt: 1000, transitions: 0 });
    if (fresh === undefined) throw new Error('no lease');
    expect(claim(fresh, 'b', 15_000, 10_000)).toBeUndefined();
    expect(claim(fresh, 'a', 15_000, 10_000)).toMatchObject({
      holder: 'a',
      renewedAt: 10_000,
      transitions: 0,
    });
    expect(claim(fresh, 'b', 15_000, 16_001)).toMatchObject({ holder: 'b', transitions: 1 });
    expect(claim({ ...fresh, holder: '' }, 'b', 15_000, 2000)).toMatchObject({ holder: 'b' });
  });
});
