import { monotonicNow } from '../time/clock';
import type { Cluster, Redis } from 'ioredis';
import { slotTag } from './key-slot';
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
  if (isClusterClient(client)) await Promise.all(client.nodes('master').map((master) => probeMaster(client, master, keyPrefix, deadlines)));
  else await probeWrite(client, deadlines, 'health probe', healthProbeKey(keyPrefix), acks);
  return monotonicNow() - sentAt;
}

/**
 * One master's probe: a write on its own connection, of a key in a slot the Cluster client's map gives it
 * (`<prefix>{<slot tag>}:probe`: the locks' namespace, next to no lock's keys); a PING while the map names
 * no slot of it. The operation names the master, so the timeout or refusal says which one.
 */
function probeMaster(cluster: Cluster, master: Redis, keyPrefix: string, deadlines: CommandDeadlines): Promise<unknown> {
  const name = `${master.options.host ?? '?'}:${master.options.port ?? '?'}`;
  const slot = cluster.slots?.findIndex((owners) => owners?.[0] === name) ?? -1;
  if (slot < 0) return deadlines.bound(`ping of Cluster master ${name}`, () => master.ping());
  return probeWrite(master, deadlines, `health probe of Cluster master ${name}`, `${keyPrefix}{${slotTag(slot)}}:probe`);
}
