/** Number formatting shared by the terminal table, results.md and the chart. */
export function fmt(value: number | undefined, digits = 1): string {
  if (value === undefined || Number.isNaN(value)) return 'n/a';
  if (!Number.isFinite(value)) return '∞';
  if (Math.abs(value) >= 10_000) return Math.round(value).toLocaleString('en-US');
  return value.toFixed(digits);
}

export const fmtMs = (value: number | undefined): string =>
  value === undefined || Number.isNaN(value) ? 'n/a' : value < 10 ? value.toFixed(2) : fmt(value, 0);

export const fmtPct = (share: number | undefined): string => (share === undefined || Number.isNaN(share) ? 'n/a' : `${(share * 100).toFixed(0)}%`);

/** "1.12× (0.95–1.30)": a paired ratio's median and its spread over rounds. */
export const fmtRatioSpread = (ratio: { median: number; min: number; max: number }): string =>
  `${ratio.median.toFixed(2)}× (${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)})`;

/** A table as rows of cells; the first row is the header. */
export type Table = string[][];

/** Markdown table with padded columns, readable as-is on a terminal. */
export function renderTable(table: Table): string {
  const widths = table[0].map((_, c) => Math.max(...table.map((row) => (row[c] ?? '').length)));
  const line = (row: string[]) => `| ${row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join(' | ')} |`;
  const rule = `|${widths.map((w, c) => (c === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(table[0]), rule, ...table.slice(1).map(line)].join('\n');
}
