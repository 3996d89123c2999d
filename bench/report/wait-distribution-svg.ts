import type { ContendedResult } from '../workloads/contended.workload';
import { percentile } from '../measure/percentiles';
import { fmtMs } from './format';

const WIDTH = 900;
const HEIGHT = 520;
const MARGIN = { left: 70, right: 250, top: 50, bottom: 60 };
const COLORS = ['#d62728', '#1f77b4', '#2ca02c', '#9467bd', '#7f7f7f', '#ff7f0e'];
/** Waits below this are drawn at it: a log axis has no zero (an immediate take is ~0.1 ms). */
const MIN_MS = 0.05;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Hand-written SVG: the cumulative distribution of waits (call → entering the section) per
 * library, log-scaled time axis, with the p99 bound as a dashed line.
 */
export function waitDistributionSvg(title: string, byLib: ReadonlyArray<{ name: string; result: ContendedResult }>, boundMs: number): string {
  const maxWait = Math.max(boundMs, ...byLib.map((l) => l.result.waitMax));
  const decadeMax = 10 ** Math.ceil(Math.log10(maxWait));
  const lo = Math.log10(MIN_MS);
  const hi = Math.log10(decadeMax);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (ms: number) => MARGIN.left + ((Math.log10(Math.max(ms, MIN_MS)) - lo) / (hi - lo)) * plotW;
  const y = (share: number) => MARGIN.top + (1 - share) * plotH;

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
  );
  parts.push(`<rect width="100%" height="100%" fill="white"/>`);
  parts.push(`<text x="${MARGIN.left}" y="24" font-size="15" font-weight="bold">${esc(title)}</text>`);
  // Grid and axes.
  for (let e = Math.ceil(lo); e <= hi; e++) {
    const gx = x(10 ** e).toFixed(1);
    parts.push(`<line x1="${gx}" y1="${MARGIN.top}" x2="${gx}" y2="${MARGIN.top + plotH}" stroke="#ddd"/>`);
    parts.push(`<text x="${gx}" y="${MARGIN.top + plotH + 18}" text-anchor="middle">${10 ** e >= 1 ? 10 ** e : (10 ** e).toString()}</text>`);
  }
  for (let s = 0; s <= 1.0001; s += 0.25) {
    const gy = y(s).toFixed(1);
    parts.push(`<line x1="${MARGIN.left}" y1="${gy}" x2="${MARGIN.left + plotW}" y2="${gy}" stroke="#ddd"/>`);
    parts.push(`<text x="${MARGIN.left - 8}" y="${Number(gy) + 4}" text-anchor="end">${Math.round(s * 100)}%</text>`);
  }
  parts.push(`<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  parts.push(
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 18}" text-anchor="middle">wait, ms (log scale; call → entering the critical section)</text>`,
  );
  parts.push(`<text transform="translate(18 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">share of acquisitions waiting ≤ x</text>`);
  // The bound for p99.
  const bx = x(boundMs);
  parts.push(`<line x1="${bx}" y1="${MARGIN.top}" x2="${bx}" y2="${MARGIN.top + plotH}" stroke="#000" stroke-dasharray="5 4"/>`);
  parts.push(`<text x="${bx + 4}" y="${MARGIN.top + 14}">p99 target ${boundMs} ms</text>`);
  // One step line per library.
  byLib.forEach(({ name, result }, i) => {
    const color = COLORS[i % COLORS.length];
    const sorted = [...result.waits].sort((a, b) => a - b);
    const n = sorted.length;
    const points: string[] = [`${x(MIN_MS).toFixed(1)},${y(0).toFixed(1)}`];
    sorted.forEach((w, k) => {
      points.push(`${x(w).toFixed(1)},${y(k / n).toFixed(1)}`, `${x(w).toFixed(1)},${y((k + 1) / n).toFixed(1)}`);
    });
    points.push(`${x(decadeMax).toFixed(1)},${y(1).toFixed(1)}`);
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="${name === 'ours' ? 3 : 2}" points="${points.join(' ')}"/>`);
    const ly = MARGIN.top + 10 + i * 44;
    const lx = MARGIN.left + plotW + 16;
    parts.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 24}" y2="${ly}" stroke="${color}" stroke-width="3"/>`);
    parts.push(`<text x="${lx + 30}" y="${ly + 4}" font-weight="bold">${esc(name)}</text>`);
    parts.push(`<text x="${lx + 30}" y="${ly + 20}">p50 ${fmtMs(percentile(sorted, 50))} · p99 ${fmtMs(percentile(sorted, 99))} ms (n=${n})</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
