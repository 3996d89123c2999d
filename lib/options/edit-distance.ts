/**
 * Typing slips between two names: insertions, deletions, substitutions, and two adjacent characters swapped, which
 * count as one ('prot' for 'port'; the optimal string alignment distance). Callers only ask "within `limit`?", so a
 * pair whose lengths alone differ by more answers `limit + 1` without the table.
 */
export function editDistance(a: string, b: string, limit = 2): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  // rows[i][j]: edits from a's first i characters to b's first j.
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)];
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = rows[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1);
      row[j] = Math.min(rows[i - 1][j] + 1, row[j - 1] + 1, substitution);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j], rows[i - 2][j - 2] + 1);
    }
    rows.push(row);
  }
  return rows[a.length][b.length];
}
