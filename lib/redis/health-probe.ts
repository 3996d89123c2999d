import type { Cluster, Redis } from 'ioredis';
import { monotonicNow } from '../time/clock';
import type { CommandDeadlines } from './command-deadlines';
import type { PipelineResults } from './lua-script';
import { slotTag } from './key-slot';
import { isClusterClient, type RedisClient } from './redis-connection';
import type { ReplicaAcks } from './replica-acks';

/**
 * The key the health probe writes: in the locks' own namespace (every lock name starts `<prefix>{`,
 * lock-redis-keys.ts), so a Redis user allowed only that (`~<prefix>{*`) may write it and, with an empty
 * keyPrefix, it cannot be an application's key. Next to, never one of, the keys of a lock named
 * `health` (`<prefix>{health}`, `:f`, `:q`, `:w`); it belongs to no owner and nothing reads it.
 */
export const healthProbeKey = (keyPrefix: string): string => `${keyPrefix}{health}:probe`;

/** How long a probe write stays: long enough to be a write, short enough to leave nothing behind. */
export const HEALTH_PROBE_TTL_MS = '1000';

/**
 * The health check's round trip to a single Redis, Sentinel's primary or a Cluster, in ms. Rejects
 * with `LockConnectionError` (the server's reason, or the timeout) when lock calls would fail now.
 *
 * A write, not a PING: a Redis that answers PING may still refuse every acquire (out of memory under
 * noeviction, READONLY after it was demoted to a replica) or hold it until it times out (CLIENT PAUSE
 * WRITE). On a Cluster every master gets its own probe write, at the same time, on a slot it owns: a frozen
 * or full master fails the acquires of its share of the slots while the others answer.
 * With `replicaAcks`, the write is confirmed by WAIT in the same pipeline as every lock write is: while
 * fewer replicas confirm, every acquire fails, and so does the probe. Everything is bounded by the same
 * `deadlines` as every lock call.
 */
export async function probeRedis(client: RedisClient, deadlines: CommandDeadlines, keyPrefix: string, acks?: ReplicaAcks): Promise<number> {
  const sentAt = monotonicNow();
  if (isClusterClient(client)) await Promise.all(client.nodes('master').map((master) => probeMaster(client, master, keyPrefix, deadlines)));
  else await probeWrite(client, deadlines, healthProbeKey(keyPrefix), acks);
  return monotonicNow() - sentAt;
}

/** The probe write of a single Redis (or Sentinel's primary), confirmed by the replicas with `replicaAcks`. */
async function probeWrite(client: Redis, deadlines: CommandDeadlines, key: string, acks: ReplicaAcks | undefined): Promise<void> {
  if (!acks) {
    await deadlines.bound('health probe', () => client.set(key, '1', 'PX', HEALTH_PROBE_TTL_MS));
    return;
  }
  const confirmed = await deadlines.bound('health probe', () => confirmedWrite(client, key, acks));
  if (confirmed < acks.required) throw acks.unconfirmedProbe(confirmed);
}

/** SET then WAIT in one pipeline (one round trip); resolves the replicas that confirmed. */
async function confirmedWrite(client: Redis, key: string, acks: ReplicaAcks): Promise<number> {
  const [[setError], [waitError, confirmed]] = ((await client
    .pipeline()
    .set(key, '1', 'PX', HEALTH_PROBE_TTL_MS)
    .call('WAIT', ...acks.waitArgs)
    .exec()) ?? []) as PipelineResults;
  if (setError) throw setError;
  if (waitError) throw waitError;
  return Number(confirmed);
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
  const key = `${keyPrefix}{${slotTag(slot)}}:probe`;
  return deadlines.bound(`health probe of Cluster master ${name}`, () => master.set(key, '1', 'PX', HEALTH_PROBE_TTL_MS));
}
