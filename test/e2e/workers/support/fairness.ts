/**
 * How a lock shared the key between contenders, from the sections they logged (host monotonic
 * stamps): who entered in which order. A FIFO lock under continuous contention goes round the
 * contenders; an unfair one lets whoever just released take it again while the others wait.
 */
import type { Section } from '../../../harness/history';

/** The workers of `sections` in the order they entered (one key). */
export function enterOrder(sections: readonly Section[]): string[] {
  return [...sections].sort((a, b) => (BigInt(a.enterAt) < BigInt(b.enterAt) ? -1 : 1)).map((s) => String(s.worker));
}

/** The longest run of consecutive sections (in enter order) that went to one worker. */
export function longestRun(order: readonly string[]): { worker: string; length: number } {
  let best = { worker: '', length: 0 };
  let run = 0;
  for (let i = 0; i < order.length; i++) {
    run = i > 0 && order[i] === order[i - 1] ? run + 1 : 1;
    if (run > best.length) best = { worker: order[i], length: run };
  }
  return best;
}

/** How many of the first `count` sections (in enter order) each worker had. */
export function sectionsAmongFirst(order: readonly string[], count: number): Map<string, number> {
  const shares = new Map<string, number>();
  for (const w of new Set(order)) shares.set(w, 0);
  for (const w of order.slice(0, count)) shares.set(w, shares.get(w)! + 1);
  return shares;
}
