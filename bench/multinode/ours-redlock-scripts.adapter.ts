import Redis from 'ioredis';
import { newOwnerToken } from '../../lib/core/owner-token';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { nodeMarkerKey } from '../../lib/redis/redlock';
import { fenceProposal } from '../../lib/redis/redlock/fence-proposal';
import { REDLOCK_ACQUIRE_SCRIPT, REDLOCK_RELEASE_SCRIPT } from '../../lib/redis/redlock/redlock-scripts';
import { wallClockMicros } from '../../lib/time/clock';
import { BENCH_TTL_MS, Held, LockAdapter, LockClient } from '../adapters/lock-adapter';
import { OURS_SCRIPT_ARGS } from '../adapters/ours-scripts.adapter';

type NodeClient = Redis & {
  benchAcquire(...keysThenArgs: string[]): Promise<unknown>;
  benchRelease(...keysThenArgs: string[]): Promise<unknown>;
};

/** Resolves once `quorum` of `calls` resolved with a value `counts` accepts; rejects once that can no longer happen. */
function majority<T>(calls: ReadonlyArray<Promise<T>>, quorum: number, counts: (value: T) => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    let yes = 0;
    let no = 0;
    for (const call of calls) {
      call.then(
        (value) => (counts(value) ? ++yes === quorum && resolve() : ++no > calls.length - quorum && reject(new Error('no majority'))),
        () => ++no > calls.length - quorum && reject(new Error('no majority')),
      );
    }
  });
}

/**
 * The Redlock mode's own acquire and release scripts on every node with the keys and arguments it sends (recovery
 * off, as the bench's ours runs it), each answered once a majority granted or released, like ours; called by bare
 * ioredis clients, one per node: what the nodes do for ours without the library's client code (tickets, deadlines,
 * late answers, lock handle). Uncontended only. In (m-a), ours ÷ this is the client code's share of ours' time.
 */
export const oursRedlockScriptsAdapter: LockAdapter = {
  name: 'ours-scripts',
  settings:
    "this library's Redlock acquire + release scripts on every node (same keys and arguments, recovery off), each answered at a majority as ours is, sent by bare ioredis clients; no library code; uncontended only",
  role: 'diagnostic',
  async create(target: string): Promise<LockClient> {
    const clients = target
      .split(' ')
      .filter(Boolean)
      .map((url) => {
        const client = new Redis(url) as NodeClient;
        client.defineCommand('benchAcquire', { numberOfKeys: 5, lua: REDLOCK_ACQUIRE_SCRIPT });
        client.defineCommand('benchRelease', { numberOfKeys: 5, lua: REDLOCK_RELEASE_SCRIPT });
        return client;
      });
    await Promise.all(clients.map((c) => c.ping()));
    const quorum = Math.floor(clients.length / 2) + 1;
    const { keyPrefix, lease, queueExpiry, ttl, channelPrefix } = OURS_SCRIPT_ARGS;
    const marker = nodeMarkerKey(keyPrefix);
    return {
      async acquire(key: string): Promise<Held | null> {
        const k = lockRedisKeys(keyPrefix, key);
        const token = newOwnerToken('bench', BENCH_TTL_MS);
        const args = [k.lock, k.fence, k.queue, k.waiters, marker, token, ttl, String(wallClockMicros()), '0', fenceProposal(), lease, queueExpiry];
        await majority(
          clients.map((c) => c.benchAcquire(...args)),
          quorum,
          (reply) => (reply as unknown[])[0] === 1,
        );
        return {
          release: async () => {
            const releaseArgs = [k.lock, k.fence, k.queue, k.waiters, marker, token, channelPrefix, fenceProposal(), '0'];
            await majority(
              clients.map((c) => c.benchRelease(...releaseArgs)),
              quorum,
              (reply) => reply === 1 || reply === 2,
            );
          },
        };
      },
      async close() {
        await Promise.all(clients.map((c) => c.quit()));
      },
    };
  },
};
