import type { PageProps } from '../app.js';
import { MessagesOrValue } from '../components/chat.js';
import { Empty, ErrorNote, Loading } from '../components/status.js';
import { Text } from '../components/text.js';
import { asText, formatNumber, formatTime } from '../format.js';
import { isStatus, useApi, usePages, useTitle } from '../hooks.js';
import { href } from '../router.js';
import type { TraceRecord } from '../types.js';
import { NotFound } from './not-found.js';

/** Datasets of offline runs: names and versions, and a version's records as a preview. */

interface Version {
  path: string;
  sha256: string;
  bytes: number;
  publishedAt: string;
}

interface Dataset {
  name: string;
  versions: Version[];
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${formatNumber(bytes / 1024, 3)} KiB`;
  return `${formatNumber(bytes / 1024 / 1024, 3)} MiB`;
}

export function DatasetsPage({ project }: PageProps) {
  useTitle('Datasets');
  const list = useApi<{ datasets: Dataset[] }>('/v1alpha1/datasets', { project });
  return (
    <section>
      <h1>Datasets</h1>
      {list.error !== undefined && <ErrorNote error={list.error} what="datasets" />}
      {list.loading && <Loading what="datasets" />}
      {list.data !== undefined && list.data.datasets.length === 0 && (
        <Empty>No datasets in project {project}.</Empty>
      )}
      {list.data !== undefined && list.data.datasets.length > 0 && (
        <table>
          <caption class="sr-only">Datasets of project {project}</caption>
          <thead>
            <tr>
              <th scope="col">Dataset</th>
              <th scope="col">Versions</th>
              <th scope="col">Newest</th>
              <th scope="col">Size</th>
            </tr>
          </thead>
          <tbody>
            {list.data.datasets.map((d) => (
              <tr key={d.name}>
                <td>
                  <a href={href(`/datasets/${encodeURIComponent(d.name)}`, { project })}>
                    {d.name}
                  </a>
                </td>
                <td class="num">{d.versions.length}</td>
                <td>{formatTime(d.versions[0]?.publishedAt)}</td>
                <td class="num">{d.versions[0] === undefined ? '—' : size(d.versions[0].bytes)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function DatasetPage({ project, id, query }: PageProps) {
  useTitle(`Dataset ${id}`);
  const sha256 = query.get('sha256') ?? undefined;
  const datasets = useApi<{ datasets: Dataset[] }>('/v1alpha1/datasets', { project });
  const records = usePages<
    TraceRecord,
    { records: TraceRecord[]; total: number; path: string; next_page_token?: string }
  >(
    `/v1alpha1/datasets/${encodeURIComponent(id)}/records`,
    { project, sha256, page_size: '50' },
    (a) => ({ items: a.records, next: a.next_page_token }),
  );
  if (isStatus(records.error, 404))
    return <NotFound what={`dataset ${id} in project ${project}`} project={project} />;
  const dataset = datasets.data?.datasets.find((d) => d.name === id);
  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('/datasets', { project })}>Datasets</a> / {id}
      </nav>
      <h1>{id}</h1>
      {dataset !== undefined && (
        <ul class="versions" aria-label="Versions, newest first">
          {dataset.versions.map((v, i) => (
            <li key={v.sha256}>
              <a
                href={href(`/datasets/${encodeURIComponent(id)}`, { project, sha256: v.sha256 })}
                aria-current={
                  (sha256 ?? dataset.versions[0]?.sha256) === v.sha256 ? 'true' : undefined
                }
              >
                <span class="mono">{v.sha256.slice(0, 12)}</span>
              </a>{' '}
              {formatTime(v.publishedAt)} · {size(v.bytes)}
              {i === 0 && <span class="muted"> (newest)</span>}
              <div class="muted mono">{v.path}</div>
            </li>
          ))}
        </ul>
      )}
      {records.error !== undefined && <ErrorNote error={records.error} what="the records" />}
      {records.items.length > 0 && (
        <table class="records">
          <caption class="sr-only">Records of dataset {id}</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Input</th>
              <th scope="col">Output</th>
              <th scope="col">Reference</th>
            </tr>
          </thead>
          <tbody>
            {records.items.map((r) => (
              <tr key={r.id}>
                <td class="mono">{r.id}</td>
                {[r.input, r.output, r.reference].map((v, i) => (
                  <td key={i}>
                    {typeof v === 'string' || v === undefined ? (
                      <Text value={asText(v)} clamp={300} />
                    ) : (
                      <details>
                        <summary>
                          <Text value={asText(v).replace(/\s+/g, ' ')} clamp={80} />
                        </summary>
                        <MessagesOrValue value={v} label={`record ${r.id}`} />
                      </details>
                    )}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {records.loading && <Loading what="records" />}
      {records.more && !records.loading && (
        <button type="button" onClick={() => records.loadMore()}>
          Load more records
        </button>
      )}
    </section>
  );
}
