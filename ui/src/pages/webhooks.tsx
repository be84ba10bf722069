import type { PageProps } from '../app.js';
import { StatePill } from '../components/badges.js';
import { Empty, ErrorNote, Loading } from '../components/status.js';
import { Text } from '../components/text.js';
import { formatTime } from '../format.js';
import { isStatus, useApi, usePages, useTitle } from '../hooks.js';
import { href } from '../router.js';
import { NotFound } from './not-found.js';

/** Webhooks (never their secret: the API answers `secretSet`) and their deliveries. */

interface Webhook {
  name: string;
  url: string;
  events: string[];
  disabled: boolean;
  secretSet: boolean;
  createdAt: string;
  updatedAt: string;
}

interface Delivery {
  id: string;
  event: string;
  state: string;
  attempts: number;
  lastStatus?: number;
  lastError?: string;
  runId?: string;
  traceId?: string;
  policy?: string;
  createdAt: string;
  nextAttemptAt?: string;
  finishedAt?: string;
}

function events(list: string[]): string {
  return list.length === 0
    ? 'all but trace.scored'
    : list.map((e) => e.replace('WEBHOOK_EVENT_', '').toLowerCase()).join(', ');
}

export function WebhooksPage({ project }: PageProps) {
  useTitle('Webhooks');
  const list = useApi<{ webhooks: Webhook[] }>('/v1alpha1/webhooks', {
    project,
    page_size: '1000',
  });
  return (
    <section>
      <h1>Webhooks</h1>
      {list.error !== undefined && <ErrorNote error={list.error} what="webhooks" />}
      {list.loading && <Loading what="webhooks" />}
      {list.data !== undefined && list.data.webhooks.length === 0 && (
        <Empty>No webhooks in project {project}.</Empty>
      )}
      {list.data !== undefined && list.data.webhooks.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Webhooks of project {project}</caption>
            <thead>
              <tr>
                <th scope="col">Webhook</th>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">Secret</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {list.data.webhooks.map((w) => (
                <tr key={w.name}>
                  <td>
                    <a href={href(`/webhooks/${encodeURIComponent(w.name)}`, { project })}>
                      {w.name}
                    </a>
                  </td>
                  <td class="mono">
                    <Text value={w.url} />
                  </td>
                  <td>{events(w.events)}</td>
                  <td>{w.secretSet ? 'set' : 'none'}</td>
                  <td>
                    {w.disabled ? (
                      <span class="pill neutral">disabled</span>
                    ) : (
                      <span class="pill good">enabled</span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function WebhookPage({ project, id }: PageProps) {
  useTitle(`Webhook ${id}`);
  const hook = useApi<Webhook>(`/v1alpha1/webhooks/${encodeURIComponent(id)}`, { project });
  const deliveries = usePages<Delivery, { deliveries: Delivery[]; next_page_token?: string }>(
    `/v1alpha1/webhooks/${encodeURIComponent(id)}/deliveries`,
    { project, page_size: '100' },
    (a) => ({ items: a.deliveries, next: a.next_page_token }),
  );
  if (isStatus(hook.error, 404))
    return <NotFound what={`webhook ${id} in project ${project}`} project={project} />;
  if (hook.error !== undefined) return <ErrorNote error={hook.error} what={`webhook ${id}`} />;
  if (hook.data === undefined) return <Loading what="the webhook" />;
  const w = hook.data;
  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('/webhooks', { project })}>Webhooks</a> / {id}
      </nav>
      <h1>{id}</h1>
      <dl class="facts">
        <dt>URL</dt>
        <dd class="mono">
          <Text value={w.url} />
        </dd>
        <dt>Events</dt>
        <dd>{events(w.events)}</dd>
        <dt>Signing secret</dt>
        <dd>{w.secretSet ? 'set (never shown)' : 'none'}</dd>
        <dt>State</dt>
        <dd>{w.disabled ? 'disabled: sends nothing' : 'enabled'}</dd>
        <dt>Updated</dt>
        <dd>{formatTime(w.updatedAt)}</dd>
      </dl>
      <h2>Deliveries</h2>
      {deliveries.error !== undefined && <ErrorNote error={deliveries.error} what="deliveries" />}
      {!deliveries.loading && deliveries.items.length === 0 && deliveries.error === undefined && (
        <Empty>No deliveries yet.</Empty>
      )}
      {deliveries.items.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Deliveries of webhook {id}, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Delivery</th>
                <th scope="col">Event</th>
                <th scope="col">State</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last status</th>
                <th scope="col">About</th>
                <th scope="col">Created</th>
                <th scope="col">Next attempt</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.items.map((d) => (
                <tr key={d.id} class={d.state === 'FAILED' ? 'has-error' : undefined}>
                  <td class="mono">{d.id}</td>
                  <td>{d.event}</td>
                  <td>
                    <StatePill state={d.state} />
                  </td>
                  <td class="num">{d.attempts}</td>
                  <td>
                    {d.lastStatus ?? '—'}
                    {d.lastError !== undefined && (
                      <div class="muted">
                        <Text value={d.lastError} clamp={160} />
                      </div>
                    )}
                  </td>
                  <td>
                    {d.runId !== undefined && (
                      <a href={href(`/runs/${encodeURIComponent(d.runId)}`, { project })}>
                        run {d.runId}
                      </a>
                    )}
                    {d.traceId !== undefined && (
                      <a href={href(`/traces/${encodeURIComponent(d.traceId)}`, { project })}>
                        trace {d.traceId.slice(0, 12)}…
                      </a>
                    )}
                    {d.policy !== undefined && <span> policy {d.policy}</span>}
                  </td>
                  <td>{formatTime(d.createdAt)}</td>
                  <td>{formatTime(d.nextAttemptAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {deliveries.loading && <Loading what="deliveries" />}
      {deliveries.more && !deliveries.loading && (
        <button type="button" onClick={() => deliveries.loadMore()}>
          Load more deliveries
        </button>
      )}
    </section>
  );
}
