/**
 * What a lock may leave in Redis once everything is quiet (layout: lib/redis/lock-redis-keys.ts).
 * For key K and prefix P: `P{K}` (the lock) must be gone once every holder released or its lease
 * ran out; `P{K}:q` and `P{K}:w` (queue, waiters) expire 2 × waiterLease after their last waiter
 * refreshed, so they must be gone too once the caller waited that long; `P{K}:f` (the last fencing
 * token) is kept for an hour by design and is allowed, but only with an expiry.
 */
import type Redis from 'ioredis';

export type KeyRole = 'lock' | 'fence' | 'queue' | 'waiters' | 'unknown';

export interface FoundKey {
  key: string;
  /** PTTL: ms left, -1 no expiry. */
  pttl: number;
}

export interface StrayKey extends FoundKey {
  role: KeyRole;
}

/** Longest a fencing token is kept (lua-snippets.ts FENCE_RETENTION_MS). */
export const FENCE_RETENTION_MS = 3_600_000;

export function roleOf(prefix: string, key: string): KeyRole {
  if (!key.startsWith(`${prefix}{`)) return 'unknown';
  if (key.endsWith('}')) return 'lock';
  if (key.endsWith('}:f')) return 'fence';
  if (key.endsWith('}:q')) return 'queue';
  if (key.endsWith('}:w')) return 'waiters';
  return 'unknown';
}

/** Every key found except fencing tokens that expire within the retention time. Pure. */
export function strayKeys(prefix: string, found: readonly FoundKey[]): StrayKey[] {
  return found.map((k) => ({ ...k, role: roleOf(prefix, k.key) })).filter((k) => !(k.role === 'fence' && k.pttl > 0 && k.pttl <= FENCE_RETENTION_MS));
}

const globEscape = (text: string): string => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/** SCAN (never KEYS: it blocks the server) for every key under `prefix`, with its PTTL. */
export async function scanPrefix(client: Redis, prefix: string): Promise<FoundKey[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', `${globEscape(prefix)}*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  const unique = [...new Set(keys)];
  const pttls = await Promise.all(unique.map((k) => client.pttl(k)));
  // A key that expired between SCAN and PTTL (-2) is not left over.
  return unique.map((key, i) => ({ key, pttl: pttls[i] })).filter((k) => k.pttl !== -2);
}
