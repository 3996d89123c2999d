import type { Redis } from 'ioredis';
import { monotonicNow } from '../time/clock';
import type { CommandDeadlines } from './command-deadlines';
import type { PipelineResults } from './lua-script';
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
 * WRITE). On a Cluster the write reaches one slot's master only, so every master is PINGed too, at
 * the same time: a frozen master fails the acquires of its third of the slots while the others answer.
 * With `replicaAcks`, the write is confirmed by WAIT in the same pipeline as every lock write is: while
 * fewer replicas confirm, every acquire fails, and so does the probe. Everything is bounded by the same
 * `deadlines` as every lock call.
 */
export async function probeRedis(client: RedisClient, deadlines: CommandDeadlines, keyPrefix: string, acks?: ReplicaAcks): Promise<number> {
  const sentAt = monotonicNow();
  const key = healthProbeKey(keyPrefix);
  const write = acks
    ? deadlines
        .bound('health probe', () => confirmedWrite(client as Redis, key, acks))
        .then((confirmed) => {
          if (confirmed < acks.required) throw acks.unconfirmedProbe(confirmed);
        })
    : deadlines.bound('health probe', () => client.set(key, '1', 'PX', HEALTH_PROBE_TTL_MS));
  const masters = isClusterClient(client) ? client.nodes('master').map((master) => pingMaster(master, deadlines)) : [];
  await Promise.all([write, ...masters]);
  return monotonicNow() - sentAt;
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

/** The operation names the master, so the timeout or refusal says which one. */
function pingMaster(master: Redis, deadlines: CommandDeadlines): Promise<unknown> {
  const name = `${master.options.host ?? '?'}:${master.options.port ?? '?'}`;
  return deadlines.bound(`ping of Cluster master ${name}`, () => master.ping());
}
