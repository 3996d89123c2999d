import Redis from 'ioredis';
import { newOwnerToken } from '../../lib/core/owner-token';
import { LOCK_DEFAULTS } from '../../lib/options/lock-defaults';
import { lockRedisKeys, waiterChannelPrefix } from '../../lib/redis/lock-redis-keys';
import { queueKeysExpiry } from '../../lib/redis/scripts/lua-functions';
import { ACQUIRE_SCRIPT } from '../../lib/redis/scripts/acquire.script';
import { RELEASE_SCRIPT } from '../../lib/redis/scripts/release.script';
import { BENCH_TTL_MS, Held, LockAdapter, LockClient } from './lock-adapter';

type ScriptsClient = Redis & {
  benchAcquire(...keysThenArgs: string[]): Promise<unknown>;
  benchRelease(...keysThenArgs: string[]): Promise<unknown>;
};

/** The arguments this library sends with its scripts by default (the bench's ttl), as the text it sends. */
export const OURS_SCRIPT_ARGS = {
  keyPrefix: LOCK_DEFAULTS.keyPrefix,
  /** A waiting acquisition's place lease, and the queue keys' expiry. */
  lease: String(LOCK_DEFAULTS.waiterLease),
  queueExpiry: queueKeysExpiry(LOCK_DEFAULTS.waiterLease),
  ttl: String(BENCH_TTL_MS),
  channelPrefix: waiterChannelPrefix(LOCK_DEFAULTS.keyPrefix),
} as const;

/**
 * This library's own acquire and release scripts with the keys and arguments it sends (a first attempt of a waiting
 * acquisition, an owner token of its format), called by one bare ioredis client with EVALSHA: what Redis does for
 * ours, without any of the library's client code (no deadlines, watchdog, lock handle, metrics). Uncontended only: it
 * cannot wait. In (a), ours ÷ this is the client library's share of ours' time, and this ÷ the raw floor the scripts'.
 */
export const oursScriptsAdapter: LockAdapter = {
  name: 'ours-scripts',
  settings: `this library's acquire + release scripts (same keys and arguments, owner token of its format), sent by a bare ioredis client with EVALSHA; no library code; uncontended only`,
  role: 'diagnostic',
  async create(redisUrl: string): Promise<LockClient> {
    const client = new Redis(redisUrl) as ScriptsClient;
    client.defineCommand('benchAcquire', { numberOfKeys: 4, lua: ACQUIRE_SCRIPT });
    client.defineCommand('benchRelease', { numberOfKeys: 4, lua: RELEASE_SCRIPT });
    await client.ping();
    const { keyPrefix, lease, queueExpiry, ttl, channelPrefix } = OURS_SCRIPT_ARGS;
    return {
      async acquire(key: string): Promise<Held | null> {
        const keys = lockRedisKeys(keyPrefix, key);
        const token = newOwnerToken('bench', BENCH_TTL_MS);
        const reply = (await client.benchAcquire(keys.lock, keys.fence, keys.queue, keys.waiters, token, ttl, lease, queueExpiry)) as unknown[];
        if (reply[0] !== 1) throw new Error(`ours-scripts: ${key} was busy; this diagnostic runs uncontended only`);
        return {
          release: async () => void (await client.benchRelease(keys.lock, keys.fence, keys.queue, keys.waiters, token, channelPrefix)),
        };
      },
      async close() {
        await client.quit();
      },
    };
  },
};
