import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import type { Handover, HandoverChannel, HandoverChannelState } from '../core/handover-channel';
import { CommandDeadlines } from './command-deadlines';
import { closeNow, isClusterClient, RedisClient, reopenWhenEnded, waitUntilReady } from './redis-connection';
import type { WakeRoute } from './wake-route';
import { monotonicNow } from '../time/clock';
import { acquisitionId } from '../core/owner-token';

export type { Handover } from '../core/handover-channel';

type Wake = (handover?: Handover) => void;

/** @internal See `WakeChannel.state`. */
export type WakeChannelState = HandoverChannelState;

/** How long a subscription the server's ACL refused (NOPERM) is not asked again: waiters poll meanwhile. */
const ACL_REFUSAL_BACKOFF_MS = 30_000;

/** How soon a slot subscription the server dropped (its slot moved to another master) is made again. */
const RESUBSCRIBE_DELAY_MS = 50;
/**
 * Longest pause between two tries at making a lost slot subscription again. A master that died keeps
 * its slots until a replica is promoted (seconds: the cluster's node timeout and an election), and
 * each try until then fails; the pause doubles from RESUBSCRIBE_DELAY_MS up to this.
 */
const MAX_RESUBSCRIBE_DELAY_MS = 2_000;

/** One sharded subscription: the channel of one slot, on the connection to the master that owned it. */
interface SlotSubscription {
  readonly slot: number;
  readonly channel: string;
  node?: string;
  connection?: Redis;
  confirmed: boolean;
  subscribing?: Promise<void>;
  /** Monotonic ms until which this slot's channel, refused by its master's ACL, is not asked again. */
  refusedUntil?: number;
  /** Tries at making it again are scheduled (lost()): one series at a time. */
  resubscribing?: boolean;
}

/**
 * Where a LockService hears its handovers, subscribed at the first wait and kept until shutdown: no
 * SUBSCRIBE/UNSUBSCRIBE per wait, no channel per key to leak, no connection per waiter. A release
 * that hands the lock to a waiter publishes `<token> <fence> <lease ms> <place ms left> <lock key>`
 * on the channel of that waiter's service only, so exactly one process hears about each release.
 *
 * `plain` (a single Redis, Sentinel, a Cluster before 7.0): one channel, `<prefix>waiters:<service>`,
 * on one subscriber connection (on a Cluster, ioredis' subscriber on one node; PUBLISH reaches it
 * from every node over the cluster bus).
 *
 * `sharded` (a Redis 7 Cluster, see wake-route.ts): one channel per slot the service has waited in,
 * `<prefix>waiters:{<slot tag>}:<service>`, SSUBSCRIBEd on a connection of ours to the master that
 * owns that slot (one connection per master, shared by its slots). When a slot moves, Redis drops
 * its subscribers (an unasked SUNSUBSCRIBE); the channel then asks the Cluster client for the new
 * slot map and subscribes on the new owner. A waiter also checks, before each attempt, that its
 * slot's subscription is on the master the Cluster client routes that slot to; if not it
 * resubscribes and tries again at once, so a lost subscription costs at most one safety-net wake-up.
 */
export class WakeChannel implements HandoverChannel {
  private connection?: RedisClient;
  private subscribing?: Promise<void>;
  private confirmed = false;
  private readonly waiters = new Map<string, { lockName: string; wake: Wake }>();
  private closed = false;
  /**
   * Steps waiting on the channel (a subscription, the mode's detection) that close() ends at once. Each
   * leaves the set when it settles: a race against one promise that settles only at close() kept a
   * reaction per attempt alive until then (about 400 B per wait while subscriptions failed).
   */
  private readonly untilClose = new Set<() => void>();
  /** Plain mode: monotonic ms until which the channel the server's ACL refused is not asked again (waiters poll meanwhile). */
  private refusedUntil = 0;
  /** Sharded mode: one wait for each node connection's handshake, shared by the slots subscribing on it. */
  private readonly nodeReady = new WeakMap<Redis, Promise<boolean>>();
  private readonly deadlines: CommandDeadlines;
  /** Sharded mode: subscriptions by slot, and by channel (to find the slot of a dropped one). */
  private readonly slots = new Map<number, SlotSubscription>();
  private readonly byChannel = new Map<string, SlotSubscription>();
  /** Sharded mode: one subscriber connection per master, by `host:port`. */
  private readonly nodeConnections = new Map<string, Redis>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** An ACL refusal of our channels was logged (once per service). */
  private refusalReported = false;

  constructor(
    private readonly source: RedisClient,
    private readonly route: WakeRoute,
    private readonly serviceId: string,
    private readonly commandTimeout: number,
    private readonly logger: Logger,
  ) {
    this.deadlines = new CommandDeadlines(commandTimeout);
  }

  /** The plain channel's name (`<prefix>waiters:<service>`); sharded channels add a slot tag before the service. */
  get name(): string {
    return this.route.plainChannel(this.serviceId);
  }

  /** True once Redis acknowledged a subscription (sharded: of any slot). */
  get subscribed(): boolean {
    if (this.route.mode === 'sharded') return [...this.slots.values()].some((s) => s.confirmed);
    return this.confirmed;
  }

  /**
   * Whether a release of `lockName` now reaches a waiter registered here: the plain channel is
   * confirmed; sharded, the lock's slot is subscribed on the master the Cluster client routes it to.
   */
  subscribedTo(lockName: string): boolean {
    if (this.route.mode !== 'sharded') return this.confirmed;
    const slot = this.route.slotOf(lockName);
    const sub = this.slots.get(slot);
    if (!sub?.confirmed || sub.connection?.status !== 'ready') return false;
    return ownerOf(this.source as Cluster, slot) === sub.node;
  }

  /**
   * @internal For health checks. `idle`: no wait has needed the channel yet (nothing to check);
   * `subscribed`: confirmed and its connection is up (sharded: every slot's); `disconnected`: a
   * subscriber connection is down or its subscription failed or was dropped, so waiters fall back
   * to polling until it is back; `refused`: the server's ACL refused the subscription (NOPERM), so waiters
   * poll until an operator grants the channel (warned once, with the ACL command); `closed`.
   */
  get state(): WakeChannelState {
    if (this.closed) return 'closed';
    if (this.route.mode === 'sharded' && this.slots.size > 0) {
      const slots = [...this.slots.values()];
      if (slots.every((s) => s.confirmed && s.connection?.status === 'ready')) return 'subscribed';
      return slots.some((s) => !s.confirmed && s.refusedUntil !== undefined) ? 'refused' : 'disconnected';
    }
    if (!this.connection) return 'idle';
    if (this.confirmed && this.connection.status === 'ready') return 'subscribed';
    return !this.confirmed && this.refusedUntil > 0 ? 'refused' : 'disconnected';
  }

  /**
   * Registers `wake` for the handover of the Redis key `lockName` to `token` (synchronous, before the
   * attempt is sent); returns the unregister function. One token serves every key of a multi-key
   * lock, so a handover is routed by both: a message about one key never wakes the wait for another.
   */
  register(token: string, lockName: string, wake: Wake): () => void {
    const id = acquisitionId(token, lockName);
    this.waiters.set(id, { lockName, wake });
    return () => this.waiters.delete(id);
  }

  /**
   * Subscribes once per service (sharded: once per slot, and again when the slot moved); true when
   * confirmed, false when it failed (waiters then poll) or the service closed.
   */
  async ensureSubscribed(lockName: string): Promise<boolean> {
    if (this.closed) return false;
    const mode = this.route.mode ?? (await this.whileOpen(this.route.detect(), 'plain'));
    if (this.closed) return false;
    if (mode === 'sharded') return this.ensureSlotSubscribed(this.route.slotOf(lockName));
    if (this.confirmed) return true;
    if (monotonicNow() < this.refusedUntil) return false;
    try {
      this.subscribing ??= this.subscribe();
      // Shutdown must not wait for a subscription that may never be answered.
      await this.whileOpen(this.subscribing, undefined);
      this.confirmed = !this.closed;
      if (this.confirmed) this.subscribedAgain(this.name, this.refusedUntil > 0);
      this.refusedUntil = 0;
    } catch (error) {
      this.subscribing = undefined; // the next waiter tries again
      if (this.subscribeFailed(this.name, error)) this.refusedUntil = monotonicNow() + ACL_REFUSAL_BACKOFF_MS;
    }
    return this.confirmed;
  }

  close(): Promise<void> {
    this.closed = true;
    this.confirmed = false;
    for (const stop of [...this.untilClose]) stop();
    this.untilClose.clear();
    this.waiters.clear();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    const connection = this.connection;
    this.connection = undefined;
    if (connection) closeNow(connection);
    for (const node of this.nodeConnections.values()) closeNow(node);
    this.nodeConnections.clear();
    this.slots.clear();
    this.byChannel.clear();
    return Promise.resolve();
  }

  /** `step`, or `onClosed` as soon as the channel closes (close() must not wait for a subscription that may never be answered). */
  private whileOpen<T, C>(step: Promise<T>, onClosed: C): Promise<T | C> {
    if (this.closed) return Promise.resolve(onClosed);
    return new Promise<T | C>((resolve, reject) => {
      const stop = () => resolve(onClosed);
      this.untilClose.add(stop);
      step.then(resolve, reject).finally(() => this.untilClose.delete(stop));
    });
  }

  /**
   * A failed subscription: waiters poll instead. Connection trouble passes (debug: the connection's own
   * messages say it); a refusal by the server's ACL lasts, so it is a warning, once per service, with the fix.
   * Returns whether it was such a refusal: the caller then does not ask for that channel again for
   * ACL_REFUSAL_BACKOFF_MS (not on every wait: the ACL refuses it again until an operator changes it).
   */
  private subscribeFailed(channel: string, error: unknown): boolean {
    // Redis' own words: the refusal arrives wrapped as a lock call's (acl-refusal.ts), which says calls fail until
    // granted; a refused subscription does not fail them (waiters poll), as the warning below says.
    const message = innermostMessage(error);
    if (!/NOPERM/.test(message)) {
      this.logger.debug?.(`Subscribing to ${channel} failed, waiting by polling: ${message}`);
      return false;
    }
    if (this.refusalReported) return true;
    this.refusalReported = true;
    this.logger.warn(
      `Redis refused the subscription to ${channel} (${message}): waiters are not told of handovers and ask again by ` +
        `polling, so a busy key changes hands later than it could. Give the module's Redis user its channels: ` +
        `ACL SETUSER <user> &${this.route.plainChannel('')}* (Redis 7 gives new users no pub/sub channel by default). ` +
        `The subscription is asked again every ${ACL_REFUSAL_BACKOFF_MS / 1000} s.`,
    );
    return true;
  }

  /** A channel refused before is subscribed now (an operator granted it): said once, as the refusal was. */
  private subscribedAgain(channel: string, wasRefused: boolean): void {
    if (!wasRefused || !this.refusalReported) return;
    this.refusalReported = false;
    this.logger.log(`Subscribed to ${channel} after Redis had refused it: waiters are told of handovers again.`);
  }

  private subscribe(): Promise<void> {
    const connection = this.connect();
    return this.deadlines.bound('subscribe', async () => {
      // Our own connections do not queue commands while connecting, so wait for the handshake first.
      if (!(await waitUntilReady(connection, this.commandTimeout))) throw new Error('subscriber connection not ready');
      await connection.subscribe(this.name);
    });
  }

  private connect(): RedisClient {
    if (this.connection) return this.connection;
    // Connects now, whether or not the source was made with lazyConnect (ours are: see createRedisConnection).
    // A connection that comes back subscribes again through resubscribe(), not ioredis' autoResubscribe.
    const connection = isClusterClient(this.source) ? this.source.duplicate() : this.source.duplicate({ lazyConnect: false, autoResubscribe: false });
    reopenWhenEnded(connection);
    connection.on('error', (error: Error) => this.logger.debug?.(`Subscriber connection: ${error.message}`));
    connection.on('message', (_channel: string, message: string) => this.deliver(message));
    if (!isClusterClient(this.source)) connection.on('ready', () => this.resubscribe(connection));
    this.connection = connection;
    return connection;
  }

  /**
   * The subscriber connection is back (a failover, a dropped socket): subscribe again. ioredis' own
   * resubscribe, sent from its ready handler, is refused without an offline queue (ours have none) when
   * the socket closed again before it was written: an unhandled rejection, and the subscription was gone
   * for good while the channel still said confirmed, so no handover reached this service's waiters any
   * more (each waited for its next refresh). A failure here marks the channel unconfirmed: the next wait
   * subscribes again.
   */
  private resubscribe(connection: RedisClient): void {
    if (!this.confirmed || this.closed || connection !== this.connection) return;
    // As a wait subscribes: bounded by commandTimeout, so a SUBSCRIBE never answered also makes the next wait subscribe.
    this.subscribe().catch((error: Error) => {
      if (connection !== this.connection || this.closed) return;
      this.logger.debug?.(`Subscribing again to ${this.name} failed, the next wait subscribes: ${error.message}`);
      this.confirmed = false;
      this.subscribing = undefined;
    });
  }

  private deliver(message: string): void {
    // Scripts see key names with the client's own keyPrefix (an ioredis option) in front.
    const parsed = parseHandover(message, this.route.clientKeyPrefix);
    if (parsed) this.waiters.get(acquisitionId(parsed.token, parsed.lockName))?.wake(parsed.handover);
  }

  // ---- sharded mode ----

  private async ensureSlotSubscribed(slot: number): Promise<boolean> {
    let sub = this.slots.get(slot);
    if (!sub) {
      sub = { slot, channel: this.route.slotChannelPrefix(slot) + this.serviceId, confirmed: false };
      this.slots.set(slot, sub);
      this.byChannel.set(sub.channel, sub);
    }
    const owner = ownerOf(this.source as Cluster, slot);
    if (sub.confirmed && sub.connection?.status === 'ready' && owner === sub.node) return true;
    if (sub.refusedUntil !== undefined && monotonicNow() < sub.refusedUntil) return false;
    try {
      sub.subscribing ??= this.subscribeSlot(sub).finally(() => (sub.subscribing = undefined));
      await this.whileOpen(sub.subscribing, undefined);
      if (sub.confirmed) this.subscribedAgain(sub.channel, sub.refusedUntil !== undefined);
      sub.refusedUntil = undefined;
    } catch (error) {
      if (this.subscribeFailed(sub.channel, error)) sub.refusedUntil = monotonicNow() + ACL_REFUSAL_BACKOFF_MS;
    }
    return !this.closed && sub.confirmed;
  }

  /** SSUBSCRIBE the slot's channel on the connection to the master the Cluster client routes the slot to. */
  private subscribeSlot(sub: SlotSubscription): Promise<void> {
    return this.deadlines.bound('subscribe', async () => {
      const node = ownerOf(this.source as Cluster, sub.slot);
      if (!node) throw new Error(`no master known for slot ${sub.slot}`);
      const connection = this.nodeConnection(node);
      if (!(await this.nodeConnectionReady(connection))) throw new Error(`subscriber connection to ${node} not ready`);
      const previous = sub.connection;
      sub.confirmed = false;
      await connection.ssubscribe(sub.channel);
      if (this.closed) return;
      // Subscribed on another master before (the slot moved): that one dropped it already, or will.
      if (previous && previous !== connection && previous.status === 'ready') previous.sunsubscribe(sub.channel).catch(() => undefined);
      sub.node = node;
      sub.connection = connection;
      sub.confirmed = true;
      // A handover announced while the slot had no subscription here went unheard: its waiters ask again now.
      if (previous) this.nudgeSlot(sub.slot);
    });
  }

  /**
   * One wait for a node connection's handshake, whatever the number of slots subscribing on it: after a
   * reconnect every slot of the master waits at once, and a listener each set off Node's
   * MaxListenersExceededWarning.
   */
  private nodeConnectionReady(connection: Redis): Promise<boolean> {
    if (connection.status === 'ready') return Promise.resolve(true);
    let ready = this.nodeReady.get(connection);
    if (!ready) {
      ready = waitUntilReady(connection, this.commandTimeout).finally(() => this.nodeReady.delete(connection));
      this.nodeReady.set(connection, ready);
    }
    return ready;
  }

  private nodeConnection(node: string): Redis {
    let connection = this.nodeConnections.get(node);
    if (connection) return connection;
    const master = (this.source as Cluster).nodes('master').find((n) => nodeKeyOf(n) === node);
    if (!master) throw new Error(`master ${node} not in the Cluster client's pool`);
    // The node's own options (host, port, password, TLS), connected now, no key prefix (channels are not keys to ioredis).
    connection = master.duplicate({ lazyConnect: false, keyPrefix: undefined, enableOfflineQueue: false });
    const created = connection;
    connection.on('smessage', (_channel: string, message: string) => this.deliver(message));
    connection.on('error', (error: Error) => this.onNodeError(error));
    connection.on('end', () => this.onNodeEnd(node, created));
    this.nodeConnections.set(node, connection);
    return connection;
  }

  /**
   * Redis drops the sharded subscribers of a slot it no longer owns (the slot migrated, or this
   * master became a replica) with an SUNSUBSCRIBE nobody asked for, which ioredis reports as an
   * error ("Command queue state error … Last reply: sunsubscribe,<channel>,<count>").
   */
  private onNodeError(error: Error): void {
    const dropped = /Last reply: sunsubscribe,(.+),\d+$/.exec(error.message);
    const sub = dropped ? this.byChannel.get(dropped[1]) : undefined;
    if (!sub) {
      this.logger.debug?.(`Subscriber connection: ${error.message}`);
      return;
    }
    this.logger.debug?.(`${sub.channel}: slot ${sub.slot} left ${sub.node}; subscribing on its new owner`);
    this.lost(sub);
  }

  /** A node connection closed for good (its retryStrategy is off): its slots subscribe again elsewhere. */
  private onNodeEnd(node: string, connection: Redis): void {
    if (this.nodeConnections.get(node) === connection) this.nodeConnections.delete(node);
    if (this.closed) return;
    for (const sub of this.slots.values()) if (sub.connection === connection) this.lost(sub);
  }

  /** Wakes every waiter on a lock in `slot` without a handover: each sends its next attempt now. */
  private nudgeSlot(slot: number): void {
    for (const { lockName, wake } of [...this.waiters.values()]) if (this.route.slotOf(lockName) === slot) wake();
  }

  /**
   * Marks a slot's subscription lost and makes it again once the Cluster client knows the slot's new
   * owner, trying until it is confirmed (or the channel closes), whether or not anyone waits in the
   * slot: a master killed keeps its slots until its replica is promoted, so the first tries fail, and
   * one try only left the channel (and the health check) disconnected for good.
   */
  private lost(sub: SlotSubscription): void {
    sub.confirmed = false;
    if (this.closed || sub.resubscribing) return;
    sub.resubscribing = true;
    const cluster = this.source as Cluster;
    const tryAfter = (delay: number) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        cluster.refreshSlotsCache(() => {
          if (this.closed || sub.confirmed) return void (sub.resubscribing = false);
          void this.ensureSlotSubscribed(sub.slot).then((confirmed) => {
            if (confirmed || this.closed) return void (sub.resubscribing = false);
            // A refusal by the master's ACL is asked again only after its back-off, as for waiters.
            const refusedFor = (sub.refusedUntil ?? 0) - monotonicNow();
            tryAfter(refusedFor > 0 ? refusedFor : Math.min(delay * 2, MAX_RESUBSCRIBE_DELAY_MS));
          });
        });
      }, delay);
      timer.unref();
      this.timers.add(timer);
    };
    tryAfter(RESUBSCRIBE_DELAY_MS);
  }
}

/** The master (`host:port`) the Cluster client sends `slot`'s commands to. */
function ownerOf(cluster: Cluster, slot: number): string | undefined {
  return cluster.slots?.[slot]?.[0];
}

function nodeKeyOf(node: Redis): string {
  const { host, port } = node.options;
  return `${host}:${port}`;
}

/** `<token> <fence> <lease ms> <place ms left> <lock key>` (the key last: it may contain spaces). */
function parseHandover(message: string, clientPrefix: string): { token: string; lockName: string; handover: Handover } | undefined {
  const fields: string[] = [];
  let from = 0;
  for (let i = 0; i < 4; i++) {
    const space = message.indexOf(' ', from);
    if (space < 0) return undefined;
    fields.push(message.slice(from, space));
    from = space + 1;
  }
  let lockName = message.slice(from);
  if (clientPrefix && lockName.startsWith(clientPrefix)) lockName = lockName.slice(clientPrefix.length);
  const [token, fence, validFor, placeLeft] = fields;
  return { token, lockName, handover: { fence: Number(fence), validFor: Number(validFor), placeLeft: Number(placeLeft) } };
}

/** The message of the error at the end of `error`'s cause chain (the server's reply, when it is wrapped). */
function innermostMessage(error: unknown): string {
  let innermost = error;
  while (innermost instanceof Error && innermost.cause instanceof Error) innermost = innermost.cause;
  return innermost instanceof Error ? innermost.message : String(innermost);
}
