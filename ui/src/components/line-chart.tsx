import { formatNumber, formatTime } from '../format.js';

/**
 * A metric over time as SVG: the window mean as a line, the bucket means as dots, sample counts
 * as bars along the bottom, the alert threshold as a dashed line, and fired (▲) and resolved (▼)
 * alert markers. The same numbers are in a table beside it for screen readers and copying.
 */

export interface ChartPoint {
  at: number;
  mean: number;
  n: number;
  windowMean: number;
}

export interface ChartMarker {
  at: number;
  firing: boolean;
  mean: number;
}

const W = 720;
const H = 220;
const PAD = { left: 48, right: 12, top: 12, bottom: 48 };
const BARS = 28;

export function LineChart({
  title,
  points,
  threshold,
  markers,
  since,
  until,
}: {
  title: string;
  points: readonly ChartPoint[];
  threshold?: number;
  markers: readonly ChartMarker[];
  since: number;
  until: number;
}) {
  const values = points.flatMap((p) => [p.mean, p.windowMean]);
  if (threshold !== undefined) values.push(threshold);
  // Scores are mostly in [0, 1]: that range as is; anything wider gets a margin.
  let lo = Math.min(0, ...values);
  let hi = Math.max(1, ...values);
  if (lo < 0 || hi > 1) {
    const margin = (hi - lo) * 0.05;
    lo = lo < 0 ? lo - margin : lo;
    hi = hi > 1 ? hi + margin : hi;
  }
  const plotBottom = H - PAD.bottom;
  const x = (t: number) =>
    PAD.left + ((t - since) / Math.max(1, until - since)) * (W - PAD.left - PAD.right);
  const y = (v: number) => PAD.top + (1 - (v - lo) / (hi - lo)) * (plotBottom - BARS - 6 - PAD.top);
  const maxN = Math.max(1, ...points.map((p) => p.n));
  const line = points
    .map((p, i) => `${i === 0 ? 'M' : 'L'}${x(p.at).toFixed(1)},${y(p.windowMean).toFixed(1)}`)
    .join(' ');
  const ticks = [lo, (lo + hi) / 2, hi];
  const timeTicks = [since, since + (until - since) / 2, until];
  return (
    <svg class="chart" viewBox={`0 0 ${W} ${H}`} role="img" aria-label={title}>
      <title>{title}</title>
      {ticks.map((v) => (
        <g key={v}>
          <line class="grid" x1={PAD.left} x2={W - PAD.right} y1={y(v)} y2={y(v)} />
          <text class="axis" x={PAD.left - 6} y={y(v) + 4} text-anchor="end">
            {formatNumber(v, 2)}
          </text>
        </g>
      ))}
      {timeTicks.map((t, i) => (
        <text
          key={t}
          class="axis"
          x={x(t)}
          y={H - 8}
          text-anchor={i === 0 ? 'start' : i === 2 ? 'end' : 'middle'}
        >
          {formatTime(new Date(t).toISOString())}
        </text>
      ))}
      {points.map((p) => (
        <rect
          key={`n${p.at}`}
          class="count-bar"
          x={x(p.at) - 2}
          width={4}
          y={plotBottom - (p.n / maxN) * BARS}
          height={(p.n / maxN) * BARS}
        >
          <title>{`${p.n} scores`}</title>
        </rect>
      ))}
      {threshold !== undefined && (
        <line
          class="threshold"
          x1={PAD.left}
          x2={W - PAD.right}
          y1={y(threshold)}
          y2={y(threshold)}
        >
          <title>{`alert threshold: below ${threshold}`}</title>
        </line>
      )}
      {points.length > 1 && <path class="window-line" d={line} />}
      {points.length === 1 && (
        <circle
          class="window-dot"
          cx={x(points[0]?.at ?? since)}
          cy={y(points[0]?.windowMean ?? 0)}
          r={4}
        />
      )}
      {points.map((p) => (
        <circle key={`m${p.at}`} class="bucket-dot" cx={x(p.at)} cy={y(p.mean)} r={2.5}>
          <title>{`${formatTime(new Date(p.at).toISOString())}: mean ${formatNumber(p.mean)} (${p.n} scores), window mean ${formatNumber(p.windowMean)}`}</title>
        </circle>
      ))}
      {markers.map((m) => (
        <text
          key={`a${m.at}${m.firing}`}
          class={m.firing ? 'marker fired' : 'marker resolved'}
          x={x(m.at)}
          y={m.firing ? PAD.top + 10 : PAD.top + 22}
          text-anchor="middle"
        >
          {m.firing ? '▲' : '▼'}
          <title>{`alert ${m.firing ? 'fired' : 'resolved'} at ${formatTime(new Date(m.at).toISOString())} (mean ${formatNumber(m.mean)})`}</title>
        </text>
      ))}
    </svg>
  );
}
