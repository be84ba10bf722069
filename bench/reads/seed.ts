/**
 * The bench's bulk load: scored traces written straight into the store's own tables by
 * INSERT … SELECT over a generated series (completing a million traces through OTLP would take
 * hours here). Only this bench uses it; the store's migrations (and its triggers) run first, as
 * a server would run them, so every index and derived table is kept as in production.
 *
 * Distributions (i is the row number, h a scrambled copy of it, so that neighbours differ):
 * - projects: `bench` 70%, `team-b` 20%, `team-c` 7%, `team-d` 3%;
 * - start times spread evenly over the 28 days before now; 10 services, 20 agent names, 5% errors;
 * - labels `env` prod 70% / staging 25% / dev 5%, `tier` (5 values), `customer` (2,000 values:
 *   each ~0.05%, a rare label), `canary=true` on 1 trace in 10,000 (almost nothing);
 * - results: policy `quality` (evaluators `tool-errors`, `latency`) on every trace, `safety`
 *   (`pii`) on 22%, `experiment` (`judge`) on ~1 in 9,000; 1% of `latency` results are errors;
 *   scored 3 s after the trace started, so scores span the same four weeks.
 */
export const PROJECT = 'bench';
export const DAY = 24 * 3_600_000;
const SPAN_MS = 28 * DAY;

type Dialect = 'sqlite' | 'postgres';

/** The statements, in order; the series and text functions are the only dialect differences. */
export function seedStatements(dialect: Dialect, traces: number, now: number): string[] {
  const sqlite = dialect === 'sqlite';
  const series = sqlite
    ? `with recursive s(i) as (select 0 union all select i + 1 from s where i < ${traces - 1})`
    : '';
  // 64-bit arithmetic on PostgreSQL too (i × step passes 2^31).
  const from = sqlite ? 'from s' : `from generate_series(0::bigint, ${traces - 1}) as s(i)`;
  const hex = sqlite ? `printf('%032x', i)` : `lpad(to_hex(i), 32, '0')`;
  const step = Math.max(1, Math.floor(SPAN_MS / traces));
  // Knuth's multiplicative hash: neighbouring rows land in different buckets.
  const h = '((i * 2654435761) % 4294967296)';
  const bucket = (div: number, n: number) => `((${h} / ${div}) % ${n})`;
  const pick = (expr: string, values: [string, number][]) => {
    let acc = 0;
    const whens = values.map(([v, share]) => {
      acc += share;
      return `when ${expr} < ${acc} then '${v}'`;
    });
    return `(case ${whens.join(' ')} end)`;
  };
  const project = pick(bucket(1, 100), [
    [PROJECT, 70],
    ['team-b', 20],
    ['team-c', 7],
    ['team-d', 3],
  ]);
  const env = pick(bucket(13, 20), [
    ['prod', 14],
    ['staging', 5],
    ['dev', 1],
  ]);
  const tier = `(case ${bucket(29, 5)} when 0 then 'gold' when 1 then 'silver' when 2 then 'bronze' when 3 then 'free' else 'trial' end)`;
  const canary = `(case when i % 10000 = 7 then ',"canary":"true"' else '' end)`;
  const labels = `'{"env":"' || ${env} || '","tier":"' || ${tier} || '","customer":"c-' || ${bucket(17, 2000)} || '"' || ${canary} || '}'`;
  const start = `(${now} - i * ${step})`;
  const result = (evaluator: string, value: string) =>
    `'{"evaluator":"${evaluator}","outcome":"OUTCOME_SCORED","scores":[{"name":"${evaluator}","value":' || (${value}) || '}],"durationMs":0.1}'`;
  const results = (
    policy: string,
    evaluator: string,
    position: number,
    value: string,
    where: string,
  ) =>
    `insert into results (project, trace_id, policy, digest, evaluator, position, outcome, result, scored_at)
     select project, trace_id, '${policy}', digest, '${evaluator}', ${position}, 'OUTCOME_SCORED',
       ${result(evaluator, value)}, scored_at
     from traces where ${where}`;
  // A value from the trace's own columns: the same on both dialects.
  const fraction = (n: number) => `(cast(duration_ms as integer) % ${n}) * 1.0 / ${n}`;
  return [
    `${series} insert into traces (project, trace_id, source, ingest_labels, first_seen_at, last_span_at,
       root_ended_at, completed_at, service, name, start_ms, duration_ms, steps, error, labels, digest,
       record, root, scored_at, usage)
     select ${project}, ${hex}, '', '{}', ${start}, ${start} + 2000, ${start} + 2000, ${start} + 2500,
       'svc-' || ${bucket(7, 10)}, 'agent-' || ${bucket(11, 20)}, ${start}, 1500 + (i % 997), 3 + (i % 9),
       case when ${bucket(3, 20)} = 0 then 1 else 0 end, ${labels},
       'd' || (i % 7), '{"id":"' || ${hex} || '","output":"ok"}', null, ${start} + 3000,
       '{"inputTokens":120,"outputTokens":30,"totalTokens":150}'
     ${from}`,
    results('quality', 'tool-errors', 0, `(error * 1)`, '1 = 1'),
    results('quality', 'latency', 1, fraction(100), 'cast(duration_ms as integer) % 100 <> 0'),
    `insert into results (project, trace_id, policy, digest, evaluator, position, outcome, result, scored_at)
     select project, trace_id, 'quality', digest, 'latency', 1, 'OUTCOME_ERROR',
       '{"evaluator":"latency","outcome":"OUTCOME_ERROR","scores":[],"error":{"code":"TIMEOUT","message":"timed out"},"durationMs":0.1}',
       scored_at
     from traces where cast(duration_ms as integer) % 100 = 0`,
    results('safety', 'pii', 0, fraction(10), `steps % 5 = 0`),
    results(
      'experiment',
      'judge',
      0,
      fraction(4),
      `(cast(duration_ms as integer) * 7 + steps) % 5000 = 3`,
    ),
  ];
}
