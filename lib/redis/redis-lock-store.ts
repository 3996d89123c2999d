import type { Redis } from 'ioredis';
import { monotonicNow } from '../time/clock';
import { withDeadline } from '../time/deadline';
import type { AcquireReply, LockStore, ReleaseOutcome, RenewRequest as StoreRenewRequest } from '../core/lock-store';
import type { StoreProbe } from '../core/store-probe';
import type { LockConnectionError } from '../errors/lock-connection.error';
import { runBoundedScript } from './bounded-script';
import { CommandDeadlines, CommandGate } from './command-deadlines';
import { isTimeoutError, toConnectionError } from './connection-errors';
import { LockRedisKeys, lockRedisKeys } from './lock-redis-keys';
import { lockStateError } from './lock-state';
import { CommandArg, isNoScript, LuaScript, PipelineResults, ScriptRunner } from './lua-script';
import { connectedReplicasOf, ReplicaAcks, timedOutBehindWaits } from './replica-acks';
import { probeRedis } from './health-probe';
import { aclRefusalOf } from './permission-check';
import { GiveBacksAfterReconnect } from './give-backs-after-reconnect';
import { WriteBatcher } from './write-batcher';
import { LOCK_SCRIPTS } from './scripts';
import { queueKeysExpiry } from './scripts/lua-functions';
import { isClusterClient, type RedisClient } from './redis-connection';
import { WakeRoute } from './wake-route';

export type { AcquireReply, ReleaseOutcome } from '../core/lock-store';

/** A renewal of one of this store's leases. */
export type RenewRequest = StoreRenewRequest<LockRedisKeys>;

/**
 * The one place that talks to Redis. Every method is one atomic script (one round trip), bounded
 * by `commandTimeout`, and reports transport trouble as `LockConnectionError`.
 *
 * With `replicaAcks`, a write that grants or prolongs a lease (acquire, extend, renew) is followed
 * by WAIT in the same pipeline (still one round trip) and counts only when enough replicas
 * confirmed it; without, the commands sent are exactly those of a plain call.
 */
export class RedisLockStore implements LockStore {
  /**
   * Where handovers are announced: PUBLISH on `<prefix>waiters:<service>`, or on a Redis 7 Cluster
   * SPUBLISH on the channel of the lock's slot (see wake-route.ts). The release script appends the
   * waiter's service id.
   */
  readonly route: WakeRoute;
  private readonly deadlines: CommandDeadlines;
  private readonly scripts: ScriptRunner;
  private readonly writes: WriteBatcher;
  /** Clean-ups the connection failed, sent again once it is back (see give-backs-after-reconnect.ts). */
  readonly giveBacksAfterReconnect: GiveBacksAfterReconnect;
  private readonly waiterLease: CommandArg;
  /** queueKeysExpiry of the waiter lease. */
  private readonly queueExpiry: CommandArg;

  constructor(
    readonly client: RedisClient,
    private readonly keyPrefix: string,
    private readonly commandTimeout: number,
    waiterLease: number,
    /** Undefined: no replica confirmation (the default). */
    readonly replicaAcks?: ReplicaAcks,
    /** Holds calls back until the first connection, refuses them while it is down (see ConnectionState). */
    gate?: CommandGate,
    /** Default: plain on a single Redis, detected once on a Cluster. */
    route?: WakeRoute,
  ) {
    this.waiterLease = String(waiterLease);
    this.queueExpiry = queueKeysExpiry(waiterLease);
    this.route = route ?? new WakeRoute(client, keyPrefix, commandTimeout);
    this.deadlines = new CommandDeadlines(commandTimeout, gate);
    this.scripts = new ScriptRunner(client);
    this.writes = new WriteBatcher(client);
    this.giveBacksAfterReconnect = new GiveBacksAfterReconnect(client, (keys, token) => this.abandon(keys, token));
  }

  /** Shutdown, once the drain is over: nothing is sent again after a reconnect any more. */
  close(): void {
    this.giveBacksAfterReconnect.close();
  }

  keysFor(key: string): LockRedisKeys {
    return lockRedisKeys(this.keyPrefix, key);
  }

  /**
   * `joinQueue`: take (or refresh) a place in the key's queue when busy. `retry`: an earlier attempt
   * with this token queued it, so a release may already have handed the lock over.
   */
  acquire(keys: LockRedisKeys, token: string, ttl: number, joinQueue: boolean, retry: boolean): Promise<AcquireReply> {
    const args: CommandArg[] = [keys.lock, keys.fence, keys.queue, keys.waiters, token, String(ttl)];
    // Only a queued token can be retried (an attempt that does not queue is never repeated).
    if (joinQueue) {
      args.push(this.waiterLease, this.queueExpiry);
      if (retry) args.push('1');
    }
    const late = (reply: unknown) => this.giveBackLateGrant(keys, token, reply);
    if (this.replicaAcks) return this.confirmedScript(LOCK_SCRIPTS.acquire, 'acquire', keys, args, acquireReply, (r) => r.acquired, late);
    return this.script(LOCK_SCRIPTS.acquire, 'acquire', keys, args, acquireReply, late);
  }

  /**
   * An acquire answered after its caller was rejected for its deadline, saying it took the lock or a queue place
   * for a token nobody uses any more (every failed attempt ends its acquisition). The caller's clean-up went out at
   * once, but a client that keeps the commands in flight across a reconnect (ioredis' default
   * `autoResendUnfulfilledCommands`, in a client you pass) sends the acquire again once the connection is back: that
   * clean-up was refused while it was down, and the replayed acquire held the key for its whole ttl. The late reply
   * comes on the connection that is back, so a clean-up sent now runs after the replay. Owner-checked: harmless
   * when the first clean-up did land.
   */
  private giveBackLateGrant(keys: LockRedisKeys, token: string, raw: unknown): void {
    let reply: AcquireReply;
    try {
      reply = acquireReply(Array.isArray(raw) && this.replicaAcks ? raw[0] : raw);
    } catch {
      return; // not an acquire's reply (an error reply): it took nothing
    }
    if (reply.acquired || reply.position >= 0) this.abandonQuietly(keys, token);
  }

  /**
   * With `replicaAcks`: confirms a lock a release handed to `token` (pub/sub handover). WAIT counts
   * only this connection's writes and that grant ran on the releaser's, so an owner-checked renewal
   * of our own is confirmed instead: replication is one ordered stream, so a replica that has our
   * renewal has the grant before it. Resolves false when the lock is not ours any more.
   */
  confirmHandover(keys: LockRedisKeys, token: string, ttl: number): Promise<boolean> {
    return this.confirmedScript(LOCK_SCRIPTS.renew, 'acquire', keys, renewArgs(keys, token, ttl), isOne, (r) => r);
  }

  /**
   * Owner-checked release: whether it was still ours, and whether a waiter got it straight away. One the connection
   * refused (it was down) is sent again as an abandon once it is back (give-backs-after-reconnect.ts): the handle is
   * released already and its token never used again, so the key need not stay taken until its lease lapses.
   */
  release(keys: LockRedisKeys, token: string): Promise<ReleaseOutcome> {
    const releasing = this.script(this.route.scripts.release, 'release', keys, this.handoverArgs(keys, token), (reply): ReleaseOutcome => {
      if (reply === 3) this.passOnStale(keys);
      return reply === 2 ? 'handed-over' : reply === 1 || reply === 3 ? 'freed' : 'not-owner';
    });
    return this.giveBacksAfterReconnect.keptIfRefused(keys, token, releasing);
  }

  /** Owner-checked; with `replicaAcks` it counts only when confirmed (else rejects, lease not prolonged). */
  extend(keys: LockRedisKeys, token: string, ttl: number): Promise<boolean> {
    const args = renewArgs(keys, token, ttl);
    if (this.replicaAcks) return this.confirmedScript(LOCK_SCRIPTS.renew, 'extend', keys, args, isOne, (r) => r);
    return this.script(LOCK_SCRIPTS.renew, 'extend', keys, args, isOne);
  }

  /**
   * Sets the remaining lease of our lock to `ttl` without replica confirmation: for shortening
   * (minHold at release), where a replica that missed it only keeps the lock longer — the safe side.
   */
  shorten(keys: LockRedisKeys, token: string, ttl: number): Promise<boolean> {
    return this.script(LOCK_SCRIPTS.renew, 'shorten', keys, renewArgs(keys, token, ttl), isOne);
  }

  /** Leaves the queue and frees the lock if an unanswered attempt took it. Safe to send any time: owner-checked. */
  async abandon(keys: LockRedisKeys, token: string): Promise<void> {
    const reply = await this.script(this.route.scripts.abandon, 'abandon', keys, this.handoverArgs(keys, token));
    if (typeof reply === 'number' && reply >= 2) this.passOnStale(keys);
  }

  /**
   * abandon(), fire-and-forget. One the connection failed is sent again once it is back (an acquire whose reply was
   * lost with it may have taken the key); otherwise a failure only means the queue place or lease lapse by themselves.
   */
  abandonQuietly(keys: LockRedisKeys, token: string): void {
    this.giveBacksAfterReconnect.keptIfRefused(keys, token, this.abandon(keys, token)).catch(() => undefined);
  }

  /**
   * A release or abandon freed the lock but met only stale waiters, and more are queued (a crashed
   * process's waiters): drop them a bounded run per call until the lock reaches a live waiter, so a
   * free lock does not wait for the live waiters' next refresh. Not awaited by the caller; failures
   * only leave the rest to the waiters' own attempts, which drop stale entries too.
   */
  private passOnStale(keys: LockRedisKeys): void {
    const args = [keys.lock, keys.fence, keys.queue, keys.waiters, this.route.channelPrefixFor(keys.lock)];
    const step = (): Promise<void> => this.script(this.route.scripts.passOn, 'release', keys, args).then((more) => (more === 1 ? step() : undefined));
    step().catch(() => undefined);
  }

  /** @internal The health check's round trip: a probe write, bounded like every call (see health-probe.ts). */
  async probe(): Promise<StoreProbe> {
    try {
      return { ms: await probeRedis(this.client, this.deadlines, this.keyPrefix, this.replicaAcks) };
    } catch (error) {
      return { error: error as Error };
    }
  }

  /** @internal Startup: what Redis refuses the module's user of what every lock call does (permission-check.ts), or undefined. */
  aclRefusal(): Promise<LockConnectionError | undefined> {
    return aclRefusalOf(this.client, this.deadlines, this.keyPrefix);
  }

  /** By script, so on a Cluster it reads the primary whatever the client's scaleReads (see is-locked.script.ts). */
  isLocked(keys: LockRedisKeys): Promise<boolean> {
    return this.script(LOCK_SCRIPTS.isLocked, 'isLocked', keys, [keys.lock], isOne);
  }

  /**
   * Renews many leases in one round trip: one pipeline on a single Redis. A Cluster cannot pipeline
   * across slots, so there each renewal is its own command (ioredis still sends them together).
   * Each entry settles on its own: true (renewed), false (not ours any more) or an Error.
   */
  async renewMany(requests: readonly RenewRequest[]): Promise<Array<boolean | Error>> {
    if (requests.length === 0) return [];
    if (isClusterClient(this.client)) {
      return Promise.all(requests.map((r) => this.extend(r.keys, r.token, r.ttl).catch((error: unknown) => toConnectionError('renew', error))));
    }
    try {
      const argLists = requests.map((r) => renewArgs(r.keys, r.token, r.ttl));
      const acks = this.replicaAcks;
      const send = (exec: () => Promise<PipelineResults>) => this.deadlines.bound('renew', exec);
      const results = await this.scripts.runPipelined(LOCK_SCRIPTS.renew, argLists, send, acks?.waitArgs);
      const renewed = requests.map((_, i) => {
        const [error, value] = results[i] ?? [new Error('no reply'), null];
        return error ? toConnectionError('renew', error) : value === 1;
      });
      return acks ? this.withConfirmation(acks, requests, renewed, results[requests.length]) : renewed;
    } catch (error) {
      const failure = toConnectionError('renew', error);
      return requests.map(() => failure);
    }
  }

  /** Renewals that succeeded on the primary count only if the pipeline's closing WAIT saw enough replicas. */
  private async withConfirmation(
    acks: ReplicaAcks,
    requests: readonly RenewRequest[],
    renewed: Array<boolean | Error>,
    [waitError, confirmed]: [Error | null, unknown] = [new Error('no reply'), null],
  ): Promise<Array<boolean | Error>> {
    if (waitError) return renewed.map((r) => (r === true ? toConnectionError('renew', waitError) : r));
    if (Number(confirmed) >= acks.required || !renewed.includes(true)) return renewed;
    const connected = await this.connectedReplicas(this.commandTimeout);
    return renewed.map((r, i) => (r === true ? acks.unconfirmed('renew', requests[i].keys.key, Number(confirmed), connected) : r));
  }

  /**
   * `script` then WAIT, one round trip. When `wrote(result)` (it granted or prolonged a lease) but
   * fewer replicas than required confirmed, rejects with the explanation; an acquire's caller then
   * gives the lock back (its error path abandons, owner-checked).
   */
  private async confirmedScript<T>(
    script: LuaScript,
    operation: string,
    keys: LockRedisKeys,
    args: CommandArg[],
    parse: (reply: unknown) => T,
    wrote: (result: T) => boolean,
    late?: (reply: unknown) => void,
  ): Promise<T> {
    const acks = this.replicaAcks!;
    const startedAt = monotonicNow();
    let reply: unknown;
    let confirmed: number;
    try {
      [reply, confirmed] = await this.deadlines.bound(
        operation,
        (attempt) => this.scripts.runThenWait(script, args, acks.waitArgs, attempt),
        undefined,
        isNoScript,
        (error) => lockStateError(keys, operation, error),
        late,
      );
    } catch (error) {
      throw isTimeoutError(error) ? timedOutBehindWaits(acks, operation, this.commandTimeout, error) : error;
    }
    const result = parse(reply);
    if (wrote(result) && confirmed < acks.required) {
      // The count of connected replicas only improves the message: asked within what is left of this call's bound.
      const connected = await this.connectedReplicas(this.commandTimeout - (monotonicNow() - startedAt));
      throw acks.unconfirmed(operation, keys.key, confirmed, connected);
    }
    return result;
  }

  /**
   * Replicas the primary has connected (for an error message); undefined when it cannot be asked within
   * `withinMs` (the INFO may queue behind other calls' WAIT on this connection).
   */
  private async connectedReplicas(withinMs: number): Promise<number | undefined> {
    if (withinMs <= 0) return undefined;
    const ask = this.deadlines.bound('info', () => (this.client as Redis).info('replication')).then(connectedReplicasOf, () => undefined);
    return withDeadline(ask, withinMs, () => new Error('no replica count in time')).catch(() => undefined);
  }

  /** Keys and arguments of the scripts that may hand the lock to the next waiter (release, abandon). */
  private handoverArgs(keys: LockRedisKeys, token: string): CommandArg[] {
    return [keys.lock, keys.fence, keys.queue, keys.waiters, token, this.route.channelPrefixFor(keys.lock)];
  }

  private script<T = unknown>(
    script: LuaScript,
    operation: string,
    keys: LockRedisKeys,
    args: CommandArg[],
    parse?: (reply: unknown) => T,
    late?: (reply: unknown) => void,
  ): Promise<T> {
    this.writes.beforeSend(this.deadlines.inFlight > 0);
    return runBoundedScript(this.deadlines, this.scripts, script, operation, keys, args, parse, isNoScript, late);
  }
}

function acquireReply(raw: unknown): AcquireReply {
  const reply = raw as [number, number, number, number?];
  if (reply[0] === 1) return { acquired: true, fence: Number(reply[1]), validFor: Number(reply[2]) };
  return { acquired: false, holderTtl: Number(reply[1]), position: Number(reply[2] ?? -1), lastFence: Number(reply[3] ?? 0) };
}

/** Keys and arguments of the owner-checked renewal script (renew, extend, shorten, handover confirmation). */
const renewArgs = (keys: LockRedisKeys, token: string, ttl: number): CommandArg[] => [keys.lock, token, String(ttl)];

const isOne = (reply: unknown): boolean => reply === 1;
