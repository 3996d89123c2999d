/**
 * The mutual-exclusion checker. Workers log when they enter and leave their critical section on
 * the host's one monotonic clock; if two sections on the same key intersect in time, the lock let
 * two holders in at once. Pure: no I/O, no clock, so it can be unit-tested on hand-made histories.
 */

/** One critical section as a worker logged it. Stamps are `process.hrtime.bigint()` strings. */
export interface Section {
  worker: string | number;
  key: string;
  token?: string;
  fence?: number | string;
  acquiredAt?: string;
  enterAt: string;
  exitAt: string;
  releasedOk?: boolean;
  lostAt?: string;
}

export interface Violation {
  key: string;
  /** The earlier section (for overlaps: the one still open; for fences: the larger fence). */
  a: Section;
  /** The section that entered too early / carried a fence not above `a`'s. */
  b: Section;
}

export interface HistoryReport {
  sections: number;
  overlaps: Violation[];
  fenceViolations: Violation[];
}

function stamp(section: Section, field: 'enterAt' | 'exitAt'): bigint {
  try {
    return BigInt(section[field]);
  } catch {
    throw new Error(`section of worker ${section.worker} on ${section.key}: ${field} is not an integer stamp: ${String(section[field])}`);
  }
}

function fenceOf(section: Section): bigint | undefined {
  if (section.fence === undefined || section.fence === null) return undefined;
  try {
    return BigInt(section.fence);
  } catch {
    throw new Error(`section of worker ${section.worker} on ${section.key}: fence is not an integer: ${String(section.fence)}`);
  }
}

/**
 * Per key, in enter order:
 * - overlap: a section enters before some earlier-entered section has exited. Compared against the
 *   latest exit so far, not just the previous section's, so a short section nested inside a long
 *   one is caught even when other sections sit between them.
 * - fence violation: a fence not strictly greater than every fence seen earlier on that key (a
 *   fenced store would have to reject that holder's writes, or it accepted a stale one).
 * Touching sections (enter == previous exit) are not an overlap.
 */
export function checkHistory(sections: readonly Section[]): HistoryReport {
  const byKey = new Map<string, Array<{ s: Section; enter: bigint; exit: bigint }>>();
  for (const s of sections) {
    const enter = stamp(s, 'enterAt');
    const exit = stamp(s, 'exitAt');
    if (exit < enter) {
      throw new Error(`section of worker ${s.worker} on ${s.key} exits (${s.exitAt}) before it enters (${s.enterAt})`);
    }
    const list = byKey.get(s.key) ?? [];
    list.push({ s, enter, exit });
    byKey.set(s.key, list);
  }

  const overlaps: Violation[] = [];
  const fenceViolations: Violation[] = [];
  for (const [key, list] of byKey) {
    list.sort((x, y) => (x.enter < y.enter ? -1 : x.enter > y.enter ? 1 : x.exit < y.exit ? -1 : x.exit > y.exit ? 1 : 0));
    let open: { s: Section; exit: bigint } | undefined;
    let maxFence: { s: Section; fence: bigint } | undefined;
    for (const cur of list) {
      if (open && cur.enter < open.exit) overlaps.push({ key, a: open.s, b: cur.s });
      if (!open || cur.exit > open.exit) open = { s: cur.s, exit: cur.exit };

      const fence = fenceOf(cur.s);
      if (fence === undefined) continue;
      if (maxFence && fence <= maxFence.fence) fenceViolations.push({ key, a: maxFence.s, b: cur.s });
      if (!maxFence || fence > maxFence.fence) maxFence = { s: cur.s, fence };
    }
  }
  return { sections: sections.length, overlaps, fenceViolations };
}
