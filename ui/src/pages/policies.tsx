import type { PageProps } from '../app.js';
import { StatePill } from '../components/badges.js';
import { JsonView } from '../components/json-view.js';
import { Empty, ErrorNote, Loading } from '../components/status.js';
import { Text } from '../components/text.js';
import { formatNumber, formatTime } from '../format.js';
import { isStatus, useApi, useTitle } from '../hooks.js';
import { href } from '../router.js';
import type { Resource } from '../types.js';
import { NotFound } from './not-found.js';

/** Online policies: their spec and their alerts' states (firing or not, mean, n, threshold). */

interface AlertState {
  metric: string;
  firing: boolean;
  mean: number;
  n: number;
  changedAt: string;
}

interface PolicySpec {
  selector?: string;
  sampling?: { rate?: number };
  stages?: { evaluators: { ref: string; name?: string }[]; window?: string }[];
  alerts?: { metric: string; below: number; minSamples?: number }[];
  disabled?: boolean;
}

type Policy = Resource & { spec: PolicySpec; status?: { alerts?: AlertState[] } };

function evaluatorsOf(p: Policy): string {
  return (p.spec.stages ?? []).flatMap((s) => s.evaluators.map((e) => e.name ?? e.ref)).join(', ');
}

export function PoliciesPage({ project }: PageProps) {
  useTitle('Policies');
  const list = useApi<{ policies: Policy[] }>('/v1alpha1/policies', { project, page_size: '1000' });
  return (
    <section>
      <h1>Policies</h1>
      {list.error !== undefined && <ErrorNote error={list.error} what="policies" />}
      {list.loading && <Loading what="policies" />}
      {list.data !== undefined && list.data.policies.length === 0 && (
        <Empty>No online policies in project {project}.</Empty>
      )}
      {list.data !== undefined && list.data.policies.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Online policies of project {project}</caption>
            <thead>
              <tr>
                <th scope="col">Policy</th>
                <th scope="col">Selector</th>
                <th scope="col">Sampling</th>
                <th scope="col">Evaluators</th>
                <th scope="col">Alerts</th>
              </tr>
            </thead>
            <tbody>
              {list.data.policies.map((p) => {
                const firing = (p.status?.alerts ?? []).filter((a) => a.firing).length;
                return (
                  <tr key={p.metadata.name}>
                    <td>
                      <a
                        href={href(`/policies/${encodeURIComponent(p.metadata.name)}`, { project })}
                      >
                        {p.metadata.name}
                      </a>
                      {p.spec.disabled === true && <span class="pill neutral">disabled</span>}
                    </td>
                    <td class="mono">
                      {p.spec.selector === undefined ? (
                        <span class="muted">every trace</span>
                      ) : (
                        <Text value={p.spec.selector} clamp={80} />
                      )}
                    </td>
                    <td class="num">{formatNumber((p.spec.sampling?.rate ?? 1) * 100)}%</td>
                    <td>{evaluatorsOf(p)}</td>
                    <td>
                      {(p.spec.alerts ?? []).length === 0 ? (
                        <span class="muted">—</span>
                      ) : firing > 0 ? (
                        <StatePill state="firing" />
                      ) : (
                        <span>{(p.spec.alerts ?? []).length} not firing</span>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function PolicyPage({ project, id }: PageProps) {
  useTitle(`Policy ${id}`);
  const policy = useApi<Policy>(`/v1alpha1/policies/${encodeURIComponent(id)}`, { project });
  if (isStatus(policy.error, 404))
    return <NotFound what={`policy ${id} in project ${project}`} project={project} />;
  if (policy.error !== undefined) return <ErrorNote error={policy.error} what={`policy ${id}`} />;
  if (policy.data === undefined) return <Loading what="the policy" />;
  const p = policy.data;
  const states = new Map((p.status?.alerts ?? []).map((a) => [a.metric, a]));
  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('/policies', { project })}>Policies</a> / {id}
      </nav>
      <h1>{id}</h1>
      <p>
        <a href={href('/scores', { project, policy: id })}>Scores over time</a> ·{' '}
        <a href={href('/traces', { project, policy: id })}>Traces it scored</a> ·{' '}
        <a href={href('/traces', { project, policy: id, outcome: 'OUTCOME_ERROR' })}>
          with an evaluator error
        </a>
      </p>
      <h2>Alerts</h2>
      {(p.spec.alerts ?? []).length === 0 ? (
        <p class="muted">This policy has no alerts.</p>
      ) : (
        <table>
          <caption class="sr-only">Alert states of policy {id}</caption>
          <thead>
            <tr>
              <th scope="col">Metric</th>
              <th scope="col">State</th>
              <th scope="col">Window mean</th>
              <th scope="col">Scores in window</th>
              <th scope="col">Fires below</th>
              <th scope="col">Since</th>
            </tr>
          </thead>
          <tbody>
            {(p.spec.alerts ?? []).map((a) => {
              const s = states.get(a.metric);
              return (
                <tr key={a.metric}>
                  <td>{a.metric}</td>
                  <td>
                    {s === undefined ? (
                      <span class="muted">not evaluated yet</span>
                    ) : (
                      <StatePill state={s.firing ? 'firing' : 'resolved'} />
                    )}
                  </td>
                  <td class="num">{formatNumber(s?.mean)}</td>
                  <td class="num">
                    {s?.n ?? '—'}
                    <span class="muted"> (needs {a.minSamples ?? 10})</span>
                  </td>
                  <td class="num">{a.below}</td>
                  <td>{formatTime(s?.changedAt)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <h2>Spec</h2>
      <JsonView value={p.spec} label="policy spec" />
      <h2>Metadata</h2>
      <JsonView value={p.metadata} label="policy metadata" />
    </section>
  );
}
