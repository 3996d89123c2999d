/** A plain-text table (columns padded; numbers right-aligned) that reads well in a terminal and in a README. */
export function renderTable(headers: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const cells = rows.map((r) => r.map(String));
  const widths = headers.map((h, c) => Math.max(h.length, ...cells.map((r) => r[c].length)));
  const numeric = headers.map((_, c) => rows.every((r) => typeof r[c] === 'number' || /^[\d.,]+( ms)?$/.test(String(r[c]))));
  const pad = (text: string, c: number) => (numeric[c] ? text.padStart(widths[c]) : text.padEnd(widths[c]));
  const line = (r: readonly string[]) => `| ${r.map(pad).join(' | ')} |`;
  const rule = `|${widths.map((w, c) => (numeric[c] ? `${'-'.repeat(w + 1)}:` : `${'-'.repeat(w + 2)}`)).join('|')}|`;
  return [line(headers), rule, ...cells.map(line)].join('\n');
}
