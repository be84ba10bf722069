import type { PageProps } from '../app.js';
import { StatePill } from '../components/badges.js';
import { JsonView } from '../components/json-view.js';
import { Empty, ErrorNote, Loading } from '../components/status.js';
import { Text } from '../components/text.js';
import { formatNumber, formatSeconds, formatTime } from '../format.js';
import { isStatus, useApi, useTitle } from '../hooks.js';
import { href } from '../router.js';
import type { Resource } from '../types.js';
import { NotFound } from './not-found.js';

/**
 * Trace sources as the spec's list view shows them (source, connector, phase, lag, pulled,
 * scored, last error), refreshed every few seconds; a source's page with its status.
 */

const REFRESH_MS = 5000;

interface SourceStatus {
  phase: string;
  lagSeconds: number | null;
  recordsPerSecond: number;
  watermark: string;
  deferred: number;
  lastError?: string;
  lastWriteBack?: string;
  pulled: number;
  scored: number;
}

type Source = Resource & { status: SourceStatus };

function connectorOf(s: Source): string {
  const spec = s.spec as { connector?: string; variant?: string };
  return spec.variant === undefined
    ? (spec.connector ?? '—')
    : `${spec.connector} (${spec.variant})`;
}

export function SourcesPage({ project }: PageProps) {
  useTitle('Sources');
  const list = useApi<{ sources: Source[] }>(
    '/v1alpha1/sources',
    { project, page_size: '1000' },
    REFRESH_MS,
  );
  return (
    <section>
      <h1>Sources</h1>
      <p class="muted" aria-live="off">
        Refreshed every {REFRESH_MS / 1000} s. Lag is the time since the last complete pull began.
      </p>
      {list.error !== undefined && <ErrorNote error={list.error} what="sources" />}
      {list.loading && <Loading what="sources" />}
      {list.data !== undefined && list.data.sources.length === 0 && (
        <Empty>No trace sources in project {project}.</Empty>
      )}
      {list.data !== undefined && list.data.sources.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Trace sources of project {project}</caption>
            <thead>
              <tr>
                <th scope="col">Source</th>
                <th scope="col">Connector</th>
                <th scope="col">Phase</th>
                <th scope="col">Lag</th>
                <th scope="col">Pulled</th>
                <th scope="col">Scored</th>
                <th scope="col">Last error</th>
              </tr>
            </thead>
            <tbody>
              {list.data.sources.map((s) => (
                <tr key={s.metadata.name}>
                  <td>
                    <a href={href(`/sources/${encodeURIComponent(s.metadata.name)}`, { project })}>
                      {project}/{s.metadata.name}
                    </a>
                  </td>
                  <td>{connectorOf(s)}</td>
                  <td>
                    <StatePill state={s.status.phase} />
                  </td>
                  <td class="num">{formatSeconds(s.status.lagSeconds)}</td>
                  <td class="num">{formatNumber(s.status.pulled)}</td>
                  <td class="num">{formatNumber(s.status.scored)}</td>
                  <td>
                    {s.status.lastError === undefined ? (
                      <span class="muted">—</span>
                    ) : (
                      <Text value={s.status.lastError} clamp={160} />
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

export function SourcePage({ project, id }: PageProps) {
  useTitle(`Source ${id}`);
  const source = useApi<Source>(
    `/v1alpha1/sources/${encodeURIComponent(id)}`,
    { project },
    REFRESH_MS,
  );
  if (isStatus(source.error, 404))
    return <NotFound what={`source ${id} in project ${project}`} project={project} />;
  if (source.data === undefined) {
    return source.error === undefined ? (
      <Loading what="the source" />
    ) : (
      <ErrorNote error={source.error} what={`source ${id}`} />
    );
  }
  const { status } = source.data;
  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('/sources', { project })}>Sources</a> / {id}
      </nav>
      <h1>
        {project}/{id} <StatePill state={status.phase} />
      </h1>
      {source.error !== undefined && <ErrorNote error={source.error} what="the latest status" />}
      <dl class="facts">
        <dt>Connector</dt>
        <dd>{connectorOf(source.data)}</dd>
        <dt>Watermark</dt>
        <dd>
          <time dateTime={status.watermark}>{formatTime(status.watermark)}</time>
          <span class="muted"> (every trace that started before it is handled)</span>
        </dd>
        <dt>Lag</dt>
        <dd>{formatSeconds(status.lagSeconds)}</dd>
        <dt>Deferred</dt>
        <dd>{formatNumber(status.deferred)} traces the store still reports running</dd>
        <dt>Pulled</dt>
        <dd>{formatNumber(status.pulled)}</dd>
        <dt>Scores written back</dt>
        <dd>{formatNumber(status.scored)}</dd>
        <dt>Records per second</dt>
        <dd>{formatNumber(status.recordsPerSecond)}</dd>
        <dt>Last write-back</dt>
        <dd>{formatTime(status.lastWriteBack)}</dd>
      </dl>
      <h2>Recent errors</h2>
      {status.lastError === undefined ? (
        <p class="muted">The last pull succeeded.</p>
      ) : (
        <div class="error-note" role="alert">
          <strong>Last pull failed:</strong> <Text value={status.lastError} />
        </div>
      )}
      <p>
        <a href={href('/traces', { project, source: id })}>Traces pulled by this source</a> ·{' '}
        <a href={href('/traces', { project, source: id, error: 'true' })}>those with an error</a>
      </p>
      <h2>Status</h2>
      <JsonView value={status} label="source status" />
      <h2>Resource</h2>
      <JsonView value={{ ...source.data, status: undefined }} label="source resource" />
    </section>
  );
}
