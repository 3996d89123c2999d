import type { Cluster } from 'ioredis';
import { CommandDeadlines } from './command-deadlines';
import { keySlot, slotTag } from './key-slot';
import { waiterChannelPrefix } from './lock-redis-keys';
import { isClusterClient, waitUntilReady, type RedisClient } from './redis-connection';
import { HandoverScripts, PUBLISHING_SCRIPTS, SHARDED_PUBLISHING_SCRIPTS } from './scripts';
import { monotonicNow } from '../time/clock';
import { settledWithin } from '../time/deadline';

/** See WakeRoute.plainAnsweredAt. */
const REDETECT_PLAIN_CLUSTER_MS = 30_000;

/**
 * How handovers travel: `plain` PUBLISH / SUBSCRIBE on one channel per service, or `sharded`
 * SPUBLISH / SSUBSCRIBE on one channel per (service, slot).
 */
export type WakeMode = 'plain' | 'sharded';

/**
 * Where a release announces a handover and where a waiter listens for it, decided per store (a Cluster
 * found `plain` is asked again now and then: see plainAnsweredAt).
 *
 * A single Redis (or Sentinel) is `plain` from construction: exactly the commands and arguments the
 * library always sent. A Cluster client is `sharded` when every master knows SPUBLISH and SSUBSCRIBE
 * (Redis 7.0+, not renamed away): PUBLISH on a Cluster is copied to every node over the cluster bus,
 * so each contended release would cost every master; SPUBLISH reaches only the shard that owns the
 * channel's slot. Until the one check (COMMAND INFO on each master) has answered, a Cluster is
 * treated as `plain` by releases (a waiter subscribed the sharded way then hears nothing and wakes
 * at its safety-net timer), and a waiter's subscription waits for the answer.
 *
 * A script may SPUBLISH only to a channel its node serves (Redis 7.0 refuses another node's with
 * "Script attempted to access a non local key"), so the channel carries a hash tag of the lock's own
 * slot: `<prefix>waiters:{<slot tag>}:<service>`, where the slot tag is a 1–3 character text hashing
 * to that slot (key-slot.ts). One channel per slot, not per lock: a service holds at most one
 * subscription per slot it has waited in (16384 at most), kept until shutdown.
 */
export class WakeRoute {
  private detected?: WakeMode;
  private detecting?: Promise<WakeMode>;
  /**
   * A Cluster found `plain` is asked again this long after (monotonic ms): its masters may be upgraded
   * to Redis 7 under a running service (replicas upgraded, then failed over to). Services started after
   * the upgrade are `sharded` at once, and a `plain` releaser and a `sharded` waiter (or the reverse) do
   * not hear each other: their handovers waited for the waiter's safety net until the old service restarted.
   */
  private plainAnsweredAt?: number;
  /** @internal How long a Cluster found `plain` stays so before it is asked again (ms); tests shorten it. */
  redetectAfterMs = REDETECT_PLAIN_CLUSTER_MS;
  /** The ioredis keyPrefix the client puts in front of key names (scripts and slots see it). */
  readonly clientKeyPrefix: string;
  private readonly plainPrefix: string;
  private readonly slotPrefixes = new Map<number, string>();

  constructor(
    readonly client: RedisClient,
    keyPrefix: string,
    private readonly commandTimeout: number,
    /** Tests and the bench: decide instead of asking the servers. */
    forced?: WakeMode,
  ) {
    this.plainPrefix = waiterChannelPrefix(keyPrefix);
    this.clientKeyPrefix = clientKeyPrefixOf(client);
    if (forced) this.detected = forced;
    else if (!isClusterClient(client)) this.detected = 'plain';
  }

  /** The mode, when known; undefined on a Cluster until detect() answered. */
  get mode(): WakeMode | undefined {
    this.redetectWhenDue();
    return this.detected;
  }

  /** Asks the Cluster's masters once (again after a failure); resolves the mode. Never rejects: `plain` when it cannot tell. */
  detect(): Promise<WakeMode> {
    if (this.detected) return Promise.resolve(this.detected);
    this.detecting ??= this.ask().then(
      (mode) => (this.detected = mode),
      () => {
        this.detecting = undefined; // not reachable yet: ask again next time
        return 'plain' as const;
      },
    );
    return this.detecting;
  }

  /**
   * One round of COMMAND INFO; a `plain` answer is asked again after redetectAfterMs. `refresh`: the
   * Cluster client's map of masters is read again first (after a failover it may still list the old ones).
   */
  private async ask(refresh = false): Promise<WakeMode> {
    const cluster = this.client as Cluster;
    if (refresh) await settledWithin(new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve())), this.commandTimeout);
    const sharded = await supportsShardedPubSub(cluster, this.commandTimeout);
    this.plainAnsweredAt = sharded ? undefined : monotonicNow();
    return sharded ? 'sharded' : 'plain';
  }

  /** A Cluster found `plain` a while ago: asked again in the background (it stays `plain` until the answer). */
  private redetectWhenDue(): void {
    if (this.plainAnsweredAt === undefined || monotonicNow() - this.plainAnsweredAt < this.redetectAfterMs) return;
    this.plainAnsweredAt = undefined;
    this.ask(true).then(
      (mode) => (this.detected = mode),
      () => (this.plainAnsweredAt = monotonicNow()), // not reachable: asked again after the same pause
    );
  }

  /** The scripts a release, abandon or pass-on runs. */
  get scripts(): HandoverScripts {
    return this.mode === 'sharded' ? SHARDED_PUBLISHING_SCRIPTS : PUBLISHING_SCRIPTS;
  }

  /** The channel prefix (the waiter's service id follows) a handover of the lock named `lockName` goes to. */
  channelPrefixFor(lockName: string): string {
    if (this.detected !== 'sharded') {
      if (this.detected === undefined) void this.detect();
      return this.plainPrefix;
    }
    return this.slotChannelPrefix(this.slotOf(lockName));
  }

  /** The Cluster slot of a lock's Redis names (the client's keyPrefix in front, as the server sees them). */
  slotOf(lockName: string): number {
    return keySlot(this.clientKeyPrefix + lockName);
  }

  /** `<prefix>waiters:{<slot tag>}:`, which hashes to `slot`. */
  slotChannelPrefix(slot: number): string {
    let prefix = this.slotPrefixes.get(slot);
    if (prefix === undefined) this.slotPrefixes.set(slot, (prefix = `${this.plainPrefix}{${slotTag(slot)}}:`));
    return prefix;
  }

  /** The plain channel of one service: `<prefix>waiters:<service>`. */
  plainChannel(serviceId: string): string {
    return this.plainPrefix + serviceId;
  }
}

/**
 * Every master answers COMMAND INFO with an entry for both SPUBLISH and SSUBSCRIBE (a server before
 * 7.0, or one with either renamed away, answers nil). Bounded: waits for the client's first
 * connection and the answers within `timeoutMs` each, else rejects (asked again at the next need).
 */
async function supportsShardedPubSub(cluster: Cluster, timeoutMs: number): Promise<boolean> {
  if (!(await waitUntilReady(cluster, timeoutMs))) throw new Error('cluster client not ready');
  const masters = cluster.nodes('master');
  if (masters.length === 0) throw new Error('no master known yet');
  const deadlines = new CommandDeadlines(timeoutMs);
  const answers = await Promise.all(masters.map((node) => deadlines.bound('detect', () => node.call('COMMAND', 'INFO', 'SPUBLISH', 'SSUBSCRIBE'))));
  return answers.every((entries) => Array.isArray(entries) && entries.length === 2 && entries.every((entry) => Array.isArray(entry)));
}

function clientKeyPrefixOf(client: RedisClient): string {
  const options = (client as { options?: { keyPrefix?: string; redisOptions?: { keyPrefix?: string } } }).options;
  return options?.keyPrefix ?? options?.redisOptions?.keyPrefix ?? '';
}
