import type Redis from 'ioredis';
import { lockRedisKeys } from '../../../../lib/redis/lock-redis-keys';

/** One lock's keys as one Redis holds them: the owner token, the last fencing token, and whether a queue is left. */
export interface LockKeyState {
  owner: string | null;
  fence: string | null;
  queue: number;
}

/**
 * Reads `key`'s state under `prefix` in one MULTI, so a script that runs meanwhile is seen whole or not at all: read
 * apart, "no owner" could come from before an attempt landed and its fencing token from after it.
 */
export async function lockKeyState(client: Redis, prefix: string, key: string): Promise<LockKeyState> {
  const keys = lockRedisKeys(prefix, key);
  const replies = (await client.multi().get(keys.lock).get(keys.fence).exists(keys.queue, keys.waiters).exec()) ?? [];
  const [owner, fence, queue] = replies.map(([error, value]) => {
    if (error) throw error;
    return value;
  }) as [string | null, string | null, number];
  return { owner, fence, queue };
}

/** A grant was made on the key (its fencing token is written), and nobody holds it or queues for it now. */
export const grantedAndGivenBack = (state: LockKeyState): boolean => state.owner === null && state.queue === 0 && state.fence !== null;
