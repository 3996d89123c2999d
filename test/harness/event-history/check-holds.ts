/**
 * Safety of the holds, per key:
 * - overlap: the confirmed intervals [grant, last true isHeld()] of two holds intersect. isHeld() is
 *   true only before the local lease deadline, which is never later than Redis' expiry, so a holder
 *   that confirmed at t really held the key at t, and so did everyone else who confirmed. Every hold
 *   counts, single or multi-key, whatever its release() said later: a lock believed held on another
 *   key's evidence is exactly the one whose release finds someone else's token.
 * - fence order: confirmed holds, in grant order, carry strictly increasing fencing tokens. Two
 *   confirmed holds that do not overlap were granted by Redis in their grant-stamp order, so any
 *   inversion is real. (An unconfirmed hold is left out: a holder SIGSTOPped between the grant and
 *   its stamp stamps late, and its lease is gone when it wakes.)
 * A nested acquisition that only borrowed its keys from the outer lock (reentrancy) is not a second
 * holder; one that took a key itself is checked like any other hold.
 */
import type { Hold } from './fold';

export type HoldViolationKind = 'overlap' | 'fence-order' | 'bad-fence' | 'grant-keys';

export interface HoldViolation {
  kind: HoldViolationKind;
  key: string;
  /** Overlap: the hold still confirmed; fence-order: the hold with the larger fence, granted earlier. */
  a: Hold;
  /** Overlap: the hold granted inside `a`'s interval; fence-order: the later grant with the fence not above. */
  b?: Hold;
  detail: string;
}

const fenceOf = (h: Hold, key: string): number => h.grant.fences[key];
const ms = (ns: bigint): string => (Number(ns) / 1e6).toFixed(3);

/** The keys a hold holds on its own account (not borrowed from an outer lock). */
function ownKeys(h: Hold): string[] {
  return h.borrowed ? [] : Object.keys(h.grant.fences);
}

export function checkHolds(holds: readonly Hold[]): HoldViolation[] {
  const violations: HoldViolation[] = [];
  const byKey = new Map<string, Hold[]>();
  for (const h of holds) {
    const asked = [...new Set(h.invoke.keys ?? [])].sort();
    const granted = Object.keys(h.grant.fences).sort();
    if (asked.join('\0') !== granted.join('\0')) {
      violations.push({
        kind: 'grant-keys',
        key: asked.join(','),
        a: h,
        detail: `asked for [${asked.join(',')}] but the lock reports fences for [${granted.join(',')}]`,
      });
    }
    for (const key of ownKeys(h)) {
      const fence = fenceOf(h, key);
      if (!Number.isSafeInteger(fence) || fence <= 0)
        violations.push({ kind: 'bad-fence', key, a: h, detail: `fence ${String(fence)} is not a positive integer` });
      if (h.to === undefined) continue;
      const list = byKey.get(key) ?? [];
      list.push(h);
      byKey.set(key, list);
    }
  }

  for (const [key, list] of byKey) {
    list.sort((x, y) => (x.from < y.from ? -1 : x.from > y.from ? 1 : 0));
    let open: Hold | undefined;
    let maxFence: Hold | undefined;
    for (const cur of list) {
      if (open && cur.from < open.to!) {
        violations.push({
          kind: 'overlap',
          key,
          a: open,
          b: cur,
          detail: `${cur.w} lock ${cur.lock} granted ${ms(open.to! - cur.from)} ms before ${open.w} lock ${open.lock} last confirmed it held "${key}"`,
        });
      }
      if (!open || cur.to! > open.to!) open = cur;

      if (maxFence && fenceOf(cur, key) <= fenceOf(maxFence, key)) {
        violations.push({
          kind: 'fence-order',
          key,
          a: maxFence,
          b: cur,
          detail: `${cur.w} lock ${cur.lock} granted later with fence ${fenceOf(cur, key)}, not above ${fenceOf(maxFence, key)} of ${maxFence.w} lock ${maxFence.lock}`,
        });
      }
      if (!maxFence || fenceOf(cur, key) > fenceOf(maxFence, key)) maxFence = cur;
    }
  }
  return violations;
}
