import { formatNumber } from '../format.js';
import type { Result, Score } from '../types.js';

/** A score in a few characters: pass/fail, a number, or its label. */
export function scoreText(score: Score): string {
  if (score.passed !== undefined) return score.passed ? 'pass' : 'fail';
  if (score.value !== undefined) return formatNumber(score.value, 2);
  return score.label ?? '—';
}

function scoreClass(score: Score): string {
  if (score.passed === true) return 'badge good';
  if (score.passed === false) return 'badge bad';
  return 'badge';
}

/** One result as badges: its scores, or SKIPPED / ERROR with the reason on hover. */
export function ResultBadges({ result }: { result: Result }) {
  if (result.outcome === 'OUTCOME_SKIPPED') {
    return (
      <span class="badge muted-badge" title={`${result.evaluator} skipped: ${result.reason ?? ''}`}>
        {result.evaluator}: skipped
      </span>
    );
  }
  if (result.outcome === 'OUTCOME_ERROR') {
    return (
      <span class="badge bad-outline" title={`${result.evaluator} failed: ${result.reason ?? ''}`}>
        {result.evaluator}: error
      </span>
    );
  }
  return (
    <>
      {result.scores.map((s) => (
        <span key={s.name} class={scoreClass(s)} title={s.explanation ?? s.name}>
          {s.name}: {scoreText(s)}
        </span>
      ))}
    </>
  );
}

/** Each policy's results as small badges, grouped by policy. */
export function PolicyScores({ scores }: { scores: Record<string, Result[]> | undefined }) {
  const policies = Object.entries(scores ?? {});
  if (policies.length === 0) return <span class="muted">—</span>;
  return (
    <ul class="policy-scores">
      {policies.map(([policy, results]) => (
        <li key={policy}>
          <span class="policy-name">{policy}</span>
          {results.map((r) => (
            <ResultBadges key={r.evaluator} result={r} />
          ))}
        </li>
      ))}
    </ul>
  );
}

export function Labels({ labels }: { labels: Record<string, string> | undefined }) {
  const entries = Object.entries(labels ?? {});
  if (entries.length === 0) return <span class="muted">—</span>;
  return (
    <ul class="labels">
      {entries.map(([k, v]) => (
        <li key={k} class="label">
          {k}={v}
        </li>
      ))}
    </ul>
  );
}

/** A state word (phase, run status, delivery state) coloured by what it means. */
export function StatePill({ state }: { state: string }) {
  const word = state.replace(/^RUN_STATUS_/, '').toLowerCase();
  const tone = /^(succeeded|delivered|tailing|backfilling|pass|resolved)$/.test(word)
    ? 'good'
    : /^(failed|error|firing|fail)$/.test(word)
      ? 'bad'
      : 'neutral';
  return <span class={`pill ${tone}`}>{word}</span>;
}
