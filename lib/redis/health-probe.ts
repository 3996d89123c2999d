import { monotonicNow } from '../time/clock';
import { probeCluster } from './cluster-health-probe';
import type { CommandDeadlines } from './command-deadlines';
import { probeWrite } from './probe-write';
import { isClusterClient, type RedisClient } from './redis-connection';
import type { ReplicaAcks } from './replica-acks';

export { HEALTH_PROBE_TTL_MS } from './probe-write';

/**
 * The key the health probe writes: in the locks' own namespace (every lock name starts `<prefix>{`,
 * lock-redis-keys.ts), so a Redis user allowed only that (`~<prefix>{*`) may write it and, with an empty
 * keyPrefix, it cannot be an application's key. Next to, never one of, the keys of a lock named
 * `health` (`<prefix>{health}`, `:f`, `:q`, `:w`); it belongs to no owner and nothing reads it.
 */
export const healthProbeKey = (keyPrefix: string): string => `${keyPrefix}{health}:probe`;

/**
 * The health check's round trip to a single Redis, Sentinel's primary or a Cluster, in ms. Rejects
 * with `LockConnectionError` (the server's reason, or the timeout) when lock calls would fail now.
 *
 * A write, not a PING, and by script, as lock calls write (probe-write.ts): a Redis that answers PING
 * may still refuse every acquire (out of memory under noeviction, READONLY after it was demoted to a
 * replica, an ACL user that may not run scripts) or hold it until it times out (CLIENT PAUSE WRITE). On a
 * Cluster every master of the slot table gets its own probe write, at the same time, on a slot it owns:
 * a dead, frozen or full master fails the acquires of its share of the slots while the others answer
 * (cluster-health-probe.ts). With `replicaAcks`, the write is confirmed by WAIT in the same pipeline as
 * every lock write is: while fewer replicas confirm, every acquire fails, and so does the probe.
 * Everything is bounded by the same `deadlines` as every lock call.
 */
export async function probeRedis(client: RedisClient, deadlines: CommandDeadlines, keyPrefix: string, acks?: ReplicaAcks): Promise<number> {
  const sentAt = monotonicNow();
  if (isClusterClient(client)) await probeCluster(client, deadlines, keyPrefix);
  else await probeWrite(client, deadlines, 'health probe', healthProbeKey(keyPrefix), acks);
  return monotonicNow() - sentAt;
}
