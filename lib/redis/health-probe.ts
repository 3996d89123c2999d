import type { Redis } from 'ioredis';
import { monotonicNow } from '../time/clock';
import type { CommandDeadlines } from './command-deadlines';
import { isClusterClient, type RedisClient } from './redis-connection';

/**
 * The key the health probe writes, under the keyPrefix. Apart from every lock's names, which all start
 * `<prefix>{` (lock-redis-keys.ts), and from the Redlock node marker; it belongs to no owner and
 * nothing reads it.
 */
export const healthProbeKey = (keyPrefix: string): string => `${keyPrefix}health:probe`;

/** How long a probe write stays: long enough to be a write, short enough to leave nothing behind. */
export const HEALTH_PROBE_TTL_MS = '1000';

/**
 * The health check's round trip to a single Redis, Sentinel's primary or a Cluster, in ms. Rejects
 * with `LockConnectionError` (the server's reason, or the timeout) when lock calls would fail now.
 *
 * A write, not a PING: a Redis that answers PING may still refuse every acquire (out of memory under
 * noeviction, READONLY after it was demoted to a replica) or hold it until it times out (CLIENT PAUSE
 * WRITE). On a Cluster the write reaches one slot's master only, so every master is PINGed too, at
 * the same time: a frozen master fails the acquires of its third of the slots while the others answer.
 * Everything is bounded by the same `deadlines` as every lock call.
 */
export async function probeRedis(client: RedisClient, deadlines: CommandDeadlines, keyPrefix: string): Promise<number> {
  const sentAt = monotonicNow();
  const write = deadlines.bound('health probe', () => client.set(healthProbeKey(keyPrefix), '1', 'PX', HEALTH_PROBE_TTL_MS));
  const masters = isClusterClient(client) ? client.nodes('master').map((master) => pingMaster(master, deadlines)) : [];
  await Promise.all([write, ...masters]);
  return monotonicNow() - sentAt;
}

/** The operation names the master, so the timeout or refusal says which one. */
function pingMaster(master: Redis, deadlines: CommandDeadlines): Promise<unknown> {
  const name = `${master.options.host ?? '?'}:${master.options.port ?? '?'}`;
  return deadlines.bound(`ping of Cluster master ${name}`, () => master.ping());
}
