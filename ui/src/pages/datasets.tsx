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

/** One uploaded content of a dataset, as `GET /v1alpha1/datasets` lists it. */
interface Version {
  name: string;
  path: string;
  sha256: string;
  records?: number;
  bytes: number;
  uploadedAt: string;
}

interface Dataset {
  name: string;
  /** Newest first. */
  versions: Version[];
}

/** The first thousand versions (the listing's largest page) grouped by dataset name. */
function useDatasets(project: string) {
  const list = useApi<{ datasets: Version[] }>('/v1alpha1/datasets', {
    project,
    page_size: '1000',
  });
  const byName = new Map<string, Version[]>();
  for (const v of list.data?.datasets ?? []) byName.set(v.name, [...(byName.get(v.name) ?? []), v]);
  const datasets: Dataset[] = [...byName].map(([name, versions]) => ({
    name,
    versions: versions.sort((a, b) => b.uploadedAt.localeCompare(a.uploadedAt)),
  }));
  return { ...list, datasets: list.data === undefined ? undefined : datasets };
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${formatNumber(bytes / 1024, 3)} KiB`;
  return `${formatNumber(bytes / 1024 / 1024, 3)} MiB`;
}

export function DatasetsPage({ project }: PageProps) {
  useTitle('Datasets');
  const list = useDatasets(project);
  return (
    <section>
      <h1>Datasets</h1>
      {list.error !== undefined && <ErrorNote error={list.error} what="datasets" />}
      {list.loading && <Loading what="datasets" />}
      {list.datasets !== undefined && list.datasets.length === 0 && (
        <Empty>No datasets in project {project}.</Empty>
      )}
      {list.datasets !== undefined && list.datasets.length > 0 && (
        <table>
          <caption class="sr-only">Datasets of project {project}</caption>
          <thead>
            <tr>
              <th scope="col">Dataset</th>
              <th scope="col">Versions</th>
              <th scope="col">Newest</th>
              <th scope="col">Records</th>
              <th scope="col">Size</th>
            </tr>
          </thead>
          <tbody>
            {list.datasets.map((d) => (
              <tr key={d.name}>
                <td>
                  <a href={href(`/datasets/${encodeURIComponent(d.name)}`, { project })}>
                    {d.name}
                  </a>
                </td>
                <td class="num">{d.versions.length}</td>
                <td>{formatTime(d.versions[0]?.uploadedAt)}</td>
                <td class="num">{formatNumber(d.versions[0]?.records)}</td>
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
  const datasets = useDatasets(project);
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
  const dataset = datasets.datasets?.find((d) => d.name === id);
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
              {formatTime(v.uploadedAt)} · {size(v.bytes)}
              {v.records !== undefined && ` · ${formatNumber(v.records)} records`}
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
