import type { AcquireReply, LockStore, ReleaseOutcome, RenewRequest } from '../../core/lock-store';
import { DistributedLockError } from '../../errors/distributed-lock.error';
import { LockConnectionError } from '../../errors/lock-connection.error';
import { assertWithinRecoveryDelay } from '../../options/redlock-options';
import { LockRedisKeys, lockRedisKeys, waiterChannelPrefix } from '../lock-redis-keys';
import type { CommandArg } from '../lua-script';
import { askAll, count, firstFailure, indexesOf, LateVotes, quorumOf, Vote } from './quorum';
import type { RedlockNode } from './redlock-node';
import { REDLOCK_SCRIPTS } from './redlock-scripts';
import { queueKeysExpiry } from '../scripts/lua-functions';
import { RedlockTickets } from './redlock-tickets';
import { AcquisitionStand, lateAnswerAction } from './late-answers';
import { NodeAcquire, nodeAcquire } from './node-acquire';
import { WinsWithAnswersDue } from './wins-with-answers-due';
import { fenceProposal } from './fence-proposal';
import { datedNodeHandover, NodeHandover } from './redlock-handovers';
import type { Handover } from '../../core/handover-channel';
import { monotonicNow } from '../../time/clock';
import type { StoreProbe } from '../../core/store-probe';
import { HEALTH_PROBE_TTL_MS, healthProbeKey } from '../health-probe';
import { GiveBacksAfterReconnect } from '../give-backs-after-reconnect';

export interface RedlockStoreSettings {
  keyPrefix: string;
  waiterLease: number;
  /** ms a node that started empty gives no votes (0: off). Also the largest ttl accepted. */
  nodeRecoveryDelay: number;
  /** Per-node bound of every call (see redlockNodeTimeout). */
  nodeTimeout: number;
}

/**
 * Shortest wait for the last nodes once a majority answered a health probe (or the node timeout, if shorter): long
 * enough for a healthy node in another zone (a 60 ms round trip was counted out by a 50 ms grace), short enough
 * that a frozen node keeps a check well inside a 1 s liveness-probe timeout.
 */
const PROBE_GRACE_MS = 250;

/** The key on each node that says since when (node clock, ms) the node has kept its data. */
export const nodeMarkerKey = (keyPrefix: string): string => `${keyPrefix}redlock:node-since`;

/**
 * The LockStore of the Redlock mode: every operation runs the node's atomic script on all N
 * independent masters at once and counts a majority (⌊N/2⌋ + 1).
 *
 * - acquire: ours when a majority granted; the lease is the shortest granted one, counted by the
 *   engine from the send time with the usual drift allowance. The fencing token is the highest
 *   token any granting node issued, written back to the granting nodes that issued less (owner-
 *   checked), and the lock counts only if the nodes that hold that token are still a majority (the
 *   argument is in docs/design.md). An attempt without a majority gives back what it got, keeping
 *   the waiter's place (ticket). A node's answer that comes after the attempt was decided, or after
 *   the node's own deadline (a client you pass replays it after a reconnect), is given back on that
 *   node or left to the holder by the rule in late-answers.ts.
 * - busy when a majority answered busy; `LockConnectionError` when fewer than a majority answered
 *   (it names how many did); a majority of answers that is neither (some granted, some busy) is busy
 *   with "ask again soon", since another waiter holds part of the vote.
 * - release / abandon: on every node. extend / renew: count only with a majority renewed.
 */
export class RedlockStore implements LockStore {
  readonly channelPrefix: string;
  readonly quorum: number;
  /**
   * @internal Attempts sent, and those in which no majority agreed either way (some nodes granted us,
   * the rest were busy or held by others): split votes, which the ticket order is there to prevent.
   */
  readonly votes = { attempts: 0, splitVotes: 0 };
  /** @internal Off only in the fencing test's control run, to show the inversion the write-back prevents. */
  fenceWriteBack = true;
  private readonly tickets: RedlockTickets;
  /** @internal Public for tests: the locks won before every node answered, until released (wins-with-answers-due.ts). */
  readonly winsWithAnswersDue = new WinsWithAnswersDue();
  /**
   * Per node, the clean-ups of ended acquisitions its connection refused, sent again at its next `ready`
   * (give-backs-after-reconnect.ts; see `abandonOn`).
   */
  readonly giveBacksAfterReconnect: readonly GiveBacksAfterReconnect[];
  private readonly marker: string;
  private readonly lease: CommandArg;
  /** queueKeysExpiry of the waiter lease. */
  private readonly queueExpiry: CommandArg;
  private readonly recovery: CommandArg;
  private readonly probeKey: string;

  constructor(
    readonly nodes: readonly RedlockNode[],
    private readonly settings: RedlockStoreSettings,
  ) {
    this.quorum = quorumOf(nodes.length);
    this.tickets = new RedlockTickets(settings.waiterLease);
    this.channelPrefix = waiterChannelPrefix(settings.keyPrefix);
    this.marker = nodeMarkerKey(settings.keyPrefix);
    this.lease = String(settings.waiterLease);
    this.queueExpiry = queueKeysExpiry(settings.waiterLease);
    this.recovery = String(settings.nodeRecoveryDelay);
    this.probeKey = healthProbeKey(settings.keyPrefix);
    this.giveBacksAfterReconnect = nodes.map(
      (node) => new GiveBacksAfterReconnect(node.client, (keys, token) => this.abandonScript(node, keys, token).then(() => undefined)),
    );
  }

  /** Shutdown, once the drain is over: nothing is sent again after a reconnect any more. */
  close(): void {
    for (const kept of this.giveBacksAfterReconnect) kept.close();
  }

  keysFor(key: string): LockRedisKeys {
    return lockRedisKeys(this.settings.keyPrefix, key);
  }

  async acquire(keys: LockRedisKeys, token: string, ttl: number, joinQueue: boolean, retry: boolean): Promise<AcquireReply> {
    this.assertTtl('ttl', ttl);
    const ticket = this.tickets.of(token, keys.lock, retry);
    const args = [keys.lock, keys.fence, keys.queue, keys.waiters, this.marker, token, String(ttl), ticket, this.recovery, fenceProposal()];
    if (joinQueue) args.push(this.lease, this.queueExpiry);
    const n = this.nodes.length;
    const sentAt = monotonicNow();
    /** Answers that come after this attempt was decided, handled once it is (see late-answers.ts). */
    const late = new LateVotes<NodeAcquire>();
    /** The number of this attempt's call to each node (RedlockTickets), when waiting. */
    const calls: Array<number | undefined> = [];
    /** The connection each node's call went out on (a late answer on another one is a replay after a reconnect). */
    const sentOn: unknown[] = [];
    let won: Won | undefined;
    // Decided at once when a majority agrees; once a majority answered without agreeing, the others get a
    // short grace (a frozen node must not cost every such attempt its whole bound); else each node's bound.
    const votes = await askAll(
      this.nodes,
      (node, i) => {
        const overdue = (raw: unknown) => late.receive(i, { ok: true, value: nodeAcquire(raw) });
        sentOn[i] = node.connection;
        const call = node.run(REDLOCK_SCRIPTS.acquire, 'acquire', keys, args, nodeAcquire, overdue);
        if (!joinQueue) return call;
        const tracked = this.tickets.track(token, keys.lock, i, sentAt, call, placeAfterAttempt);
        calls[i] = this.tickets.lastCallTo(token, keys.lock, i);
        return tracked;
      },
      (v) => count(v, isOurs) >= this.quorum || count(v, isBusy) >= this.quorum,
      // Counting only votes (not recovering nodes), so the grace never turns a wait into "too few answered".
      { when: (v) => count(v, (r) => r.kind !== 'recovering') >= this.quorum },
      late,
    );
    this.votes.attempts++;
    try {
      const stateError = votes.find((v) => v && !v.ok && v.error instanceof DistributedLockError && !(v.error instanceof LockConnectionError));
      if (stateError && !stateError.ok) throw stateError.error;
      if (count(votes, isOurs) >= this.quorum) {
        won = await this.fence(keys, token, votes);
        if (won) {
          this.tickets.forget(token, keys.lock);
          // A node that had not answered may still grant us: that answer is the holder's until the release.
          if (votes.some((v) => !v?.ok)) this.winsWithAnswersDue.add(token, keys.lock);
          // Nodes that granted but are not counted (no write-back ack) are given back.
          this.giveBack(keys, token, ticket, 'holding', won.uncounted);
          return { acquired: true, fence: won.fence, validFor: won.validFor };
        }
        this.giveBack(keys, token, ticket, joinQueue ? 'keep-place' : 'over');
        // A node died or stalled between the grant and the write-back: a waiter keeps its place and asks again.
        if (joinQueue) return { acquired: false, holderTtl: -1, position: 0, lastFence: 0 };
        throw new LockConnectionError(
          `Redlock acquire of "${keys.key}": a majority of ${n} nodes granted it, but fewer than ${this.quorum} kept it through the fencing-token write-back ` +
            `(nodes stopped answering, or the grants expired); the lock was given back. Check the nodes' health.`,
          'acquire',
        );
      }
      const ours = count(votes, isOurs);
      if (ours > 0 && !someoneElseHasMajority(votes, this.quorum)) this.votes.splitVotes++;
      // The nodes that granted us are given back. One still unanswered (decided early on a busy majority)
      // is given back once it answers, only if it granted us or failed to answer (it may have granted):
      // a busy answer (the common case) wrote nothing to give back, or queued us, which a waiter keeps
      // (late-answers.ts).
      if (ours > 0) this.giveBack(keys, token, ticket, joinQueue ? 'keep-place' : 'over', indexesOf(votes, isOurs));
      const answered = count(votes);
      const recovering = count(votes, (r) => r.kind === 'recovering');
      if (count(votes, isBusy) < this.quorum && answered - recovering < this.quorum) {
        throw this.tooFewVotes(keys, votes, answered, recovering);
      }
      if (!joinQueue) this.tickets.forget(token, keys.lock);
      return this.busyReply(votes, ours > 0 || count(votes, isBusy) < this.quorum);
    } catch (error) {
      this.tickets.forget(token, keys.lock);
      throw error;
    } finally {
      // Once the outcome is recorded (won, waiting, over), each late answer is judged by where the acquisition stands
      // when it comes. An acquisition that won or waits sends every node a clean-up when it ends, behind this attempt's
      // call on that node's connection, unless the node reconnected since (what was sent while it was down was refused).
      const endCleansUp = won !== undefined || joinQueue;
      late.handle((index, vote) => {
        const cleanedUpAfter = endCleansUp && this.nodes[index].connection === sentOn[index];
        this.answerLate(keys, token, ticket, index, calls[index], vote, cleanedUpAfter);
      });
    }
  }

  /**
   * One node's answer to attempt call `call` (RedlockTickets; undefined when not waiting) that came after the
   * attempt was decided, or after the node's deadline failed the call: given back or abandoned on that node, or
   * left, by lateAnswerAction's rule (late-answers.ts).
   */
  private answerLate(
    keys: LockRedisKeys,
    token: string,
    ticket: string,
    index: number,
    call: number | undefined,
    vote: Vote<NodeAcquire>,
    cleanedUpAfter: boolean,
  ): void {
    const lastCall = this.tickets.isLastCall(token, keys.lock, index, call);
    const action = lateAnswerAction(vote, this.standOf(token, keys.lock), lastCall, cleanedUpAfter);
    if (action === 'give-back') this.giveBack(keys, token, ticket, 'keep-place', [index]);
    else if (action === 'abandon') this.giveBack(keys, token, ticket, 'over', [index]);
  }

  /** Where `token`'s acquisition of `lock` stands now (see AcquisitionStand). */
  private standOf(token: string, lock: string): AcquisitionStand {
    const waiting = this.tickets.standOf(token, lock);
    if (waiting === 'handed-over' || this.winsWithAnswersDue.has(token, lock)) return 'holding';
    return waiting ?? 'over';
  }

  /** One node's handover message to a waiter, heard at `heardAt`, dated by the place that node last confirmed (redlock-handovers.ts). */
  datedHandover(token: string, lock: string, node: number, handover: Handover, heardAt: number): NodeHandover | undefined {
    if (handover.since !== undefined) return undefined;
    return datedNodeHandover(this.tickets.placeOn(token, lock, node), handover, this.settings.waiterLease, heardAt);
  }

  /**
   * A majority of nodes handed the lock to `token`: the acquisition is over, as after a won attempt.
   * An attempt still on its way to another node needs no give-back (see `acquire`): a grant there is
   * ours as well, and the release frees it. The ticket stays until then: a waiter that read the
   * messages after their lease ended asks again with it (its place in line).
   */
  handedOver(token: string, lock: string): void {
    this.tickets.markHandedOver(token, lock);
  }

  /**
   * The fencing write-back. Returns the token, lease and the granting nodes left out of the count, or
   * undefined when the nodes that hold the token are no longer a majority.
   */
  private async fence(keys: LockRedisKeys, token: string, votes: ReadonlyArray<Vote<NodeAcquire> | undefined>): Promise<Won | undefined> {
    const granted: Array<{ index: number; fence: number; validFor: number }> = [];
    votes.forEach((v, index) => {
      if (v?.ok && v.value.kind === 'ours') granted.push({ index, fence: v.value.fence, validFor: v.value.validFor });
    });
    const fence = Math.max(...granted.map((g) => g.fence));
    const behind = granted.filter((g) => g.fence < fence);
    const kept = granted.filter((g) => g.fence === fence);
    if (!this.fenceWriteBack) kept.push(...behind);
    else if (behind.length > 0) {
      const args = [keys.lock, keys.fence, token, String(fence)];
      const raised = await askAll(behind, (g) => this.nodes[g.index].run(REDLOCK_SCRIPTS.raiseFence, 'acquire', keys, args, isOne));
      raised.forEach((r, i) => {
        if (r?.ok && r.value) kept.push(behind[i]);
      });
    }
    if (kept.length < this.quorum) return undefined;
    const keptSet = new Set(kept.map((k) => k.index));
    return {
      fence,
      validFor: Math.min(...kept.map((k) => k.validFor)),
      uncounted: granted.filter((g) => !keptSet.has(g.index)).map((g) => g.index),
    };
  }

  /**
   * Gives back the nodes of an attempt that is not counted, owner-checked, on `only` (default: all), as `kind` says
   * (GiveBackKind). A queued waiter keeps its place (same ticket), so every waiter's next attempt still agrees on
   * who is first; otherwise it leaves like abandon. Not awaited: each node runs it after the attempt (same
   * connection, in order), and a failure only means the grant lapses by its lease, or, for an acquisition that is
   * over, that the node gets it again once its connection is back (abandonOn).
   */
  private giveBack(keys: LockRedisKeys, token: string, ticket: string, kind: GiveBackKind, only?: number[]): void {
    const targets = only ?? this.nodes.map((_, i) => i);
    const sentAt = monotonicNow();
    for (const i of targets) {
      const node = this.nodes[i];
      const call =
        kind === 'keep-place'
          ? this.tickets.track(
              token,
              keys.lock,
              i,
              sentAt,
              node.run(REDLOCK_SCRIPTS.giveBack, 'abandon', keys, [
                keys.lock,
                keys.fence,
                keys.queue,
                keys.waiters,
                token,
                ticket,
                this.lease,
                this.queueExpiry,
              ]),
              placeAfterGiveBack,
            )
          : kind === 'over'
            ? this.abandonOn(i, keys, token)
            : this.abandonScript(node, keys, token);
      call.catch(() => undefined);
    }
  }

  /**
   * The abandon script on one node: leaves its queue, frees its lock if `token` holds it (owner-checked). `args`:
   * handoverArgs, shared by the nodes of one abandon (one fence proposal, as a release sends).
   */
  private abandonScript(node: RedlockNode, keys: LockRedisKeys, token: string, args = this.handoverArgs(keys, token)): Promise<unknown> {
    return node.run(REDLOCK_SCRIPTS.abandon, 'abandon', keys, args);
  }

  /**
   * The abandon of an acquisition that is over (failed, busy without waiting, released or abandoned) on node `index`.
   * One the node's connection refused (it was down: the reset that lost an acquire's reply after the node granted it)
   * is sent again at that node's next `ready`, while the lease the token carries could still run: else the node held
   * the key for the whole ttl for a token nobody uses, a stray vote (exclusion held, but with 3 nodes, that plus one
   * node down failed every acquire of the key). Only an ended acquisition's: its token is never used again, so the
   * abandon is safe whenever it runs. A waiter's give-back (it keeps the place) must never run after a later attempt
   * of the same acquisition (late-answers.ts), and a holder's grants are its own until the release: neither is kept.
   */
  private abandonOn(index: number, keys: LockRedisKeys, token: string, args?: CommandArg[]): Promise<unknown> {
    return this.giveBacksAfterReconnect[index].keptIfRefused(keys, token, this.abandonScript(this.nodes[index], keys, token, args));
  }

  /**
   * The busy answer of an attempt without a majority for us: the shortest lease a busy node reported;
   * -1 when a node has the lock promised to a waiter ahead; -4 when no single owner holds a majority
   * (`split`: part of the vote is ours or another waiter's, or nodes did not vote), ask again soon.
   */
  private busyReply(votes: ReadonlyArray<Vote<NodeAcquire> | undefined>, split: boolean): AcquireReply {
    let holderTtl = Infinity;
    let promised = false;
    let position = -1;
    let lastFence = 0;
    for (const v of votes) {
      if (!v?.ok || v.value.kind !== 'busy') continue;
      const r = v.value;
      if (r.holderTtl > 0) holderTtl = Math.min(holderTtl, r.holderTtl);
      else promised = true;
      if (r.position >= 0) position = position < 0 ? r.position : Math.min(position, r.position);
      lastFence = Math.max(lastFence, r.lastFence);
    }
    return { acquired: false, holderTtl: split ? NO_MAJORITY : promised || holderTtl === Infinity ? -1 : holderTtl, position, lastFence };
  }

  private tooFewVotes(
    keys: LockRedisKeys,
    votes: ReadonlyArray<Vote<unknown> | undefined>,
    answered: number,
    recovering: number,
  ): LockConnectionError {
    const failure = firstFailure(votes);
    const failures = failure ? ` First failure: ${failure.message}` : ' The lock state is unknown; nothing ran under it.';
    if (recovering > 0) {
      return new LockConnectionError(
        `Redlock acquire of "${keys.key}": ${answered} of ${this.nodes.length} nodes answered, but ${recovering} of them ` +
          `${this.recentlyRestarted} and give no votes yet (they may have forgotten ` +
          `a held lock; a brand-new node waits this once too), so only ${answered - recovering} can vote and ${this.quorum} are needed. ` +
          `Retry after the delay, or run every node with appendonly yes + appendfsync always and set nodeRecoveryDelay: 0.` +
          (failure ? ` First failure: ${failure.message}` : ''),
        'acquire',
        { cause: failure },
      );
    }
    return new LockConnectionError(
      `Redlock acquire of "${keys.key}": only ${answered} of ${this.nodes.length} nodes answered, ${this.quorum} needed.${failures}`,
      'acquire',
      { cause: failure },
    );
  }

  confirmHandover(keys: LockRedisKeys, token: string, ttl: number): Promise<boolean> {
    return this.extend(keys, token, ttl);
  }

  async release(keys: LockRedisKeys, token: string): Promise<ReleaseOutcome> {
    this.acquisitionOver(token, keys);
    const args = [keys.lock, keys.fence, keys.queue, keys.waiters, this.marker, token, this.channelPrefix, fenceProposal(), this.recovery];
    const n = this.nodes.length;
    const votes = await askAll(
      this.nodes,
      // The acquisition is over from here on: a node that refused its release (it was down) gets an abandon at its reconnect.
      (node, i) => this.giveBacksAfterReconnect[i].keptIfRefused(keys, token, node.run(REDLOCK_SCRIPTS.release, 'release', keys, args, Number)),
      // A frozen node does not hold the caller up once a majority released (its release runs when it thaws).
      (v) => count(v, (r) => r === 1 || r === 2) >= this.quorum || count(v, (r) => r === 0) > n - this.quorum,
    );
    const owned = count(votes, (r) => r === 1 || r === 2);
    if (owned >= this.quorum) return count(votes, (r) => r === 2) > 0 ? 'handed-over' : 'freed';
    // Not ours only when no majority can have been ours: a node that did not answer may have been one, and so
    // may a node that restarted within nodeRecoveryDelay (3: it may have forgotten).
    if (count(votes, (r) => r === 0) > n - this.quorum) return 'not-owner';
    throw this.undecided(
      'release',
      keys,
      votes,
      count(votes, (r) => r === 3),
    );
  }

  extend(keys: LockRedisKeys, token: string, ttl: number, fence?: number): Promise<boolean> {
    this.assertTtl('extend ttl', ttl);
    return this.renewOnMajority('extend', keys, token, ttl, fence);
  }

  shorten(keys: LockRedisKeys, token: string, ttl: number): Promise<boolean> {
    this.assertTtl('minHold', ttl);
    return this.renewOnMajority('shorten', keys, token, ttl);
  }

  assertLeaseOptions(options: { readonly ttl: number; readonly minHold: number }): void {
    this.assertTtl('ttl', options.ttl);
    this.assertTtl('minHold', options.minHold);
  }

  async abandon(keys: LockRedisKeys, token: string): Promise<void> {
    this.acquisitionOver(token, keys);
    const args = this.handoverArgs(keys, token);
    const votes = await askAll(this.nodes, (_, i) => this.abandonOn(i, keys, token, args));
    if (count(votes) < this.quorum) throw this.fewAnswers('abandon', keys, votes);
  }

  /**
   * Released or abandoned: this acquisition never attempts again (its ticket goes), and a late answer from now on is an
   * ended acquisition's, not the holder's (see late-answers.ts).
   */
  private acquisitionOver(token: string, keys: LockRedisKeys): void {
    this.tickets.forget(token, keys.lock);
    this.winsWithAnswersDue.delete(token, keys.lock);
  }

  abandonQuietly(keys: LockRedisKeys, token: string): void {
    this.abandon(keys, token).catch(() => undefined);
  }

  async isLocked(keys: LockRedisKeys): Promise<boolean> {
    const n = this.nodes.length;
    const args = [keys.lock, this.marker, this.recovery];
    const votes = await askAll(
      this.nodes,
      (node) => node.run(REDLOCK_SCRIPTS.isLocked, 'isLocked', keys, args, Number),
      (v) => count(v, (r) => r === 1) >= this.quorum || count(v, (r) => r === 0) > n - this.quorum,
    );
    if (count(votes, (r) => r === 1) >= this.quorum) return true;
    // Free only when no majority can hold it: a node that did not answer may be one of the holder's, and so may
    // a node that restarted within nodeRecoveryDelay (2: it may have forgotten the lock).
    if (count(votes, (r) => r === 0) > n - this.quorum) return false;
    throw this.undecided(
      'isLocked',
      keys,
      votes,
      count(votes, (r) => r === 2),
    );
  }

  /** How messages name the nodes in their recovery period (redlock-recovery in docs/design.md). */
  private get recentlyRestarted(): string {
    return `(re)started, or lost their data, less than nodeRecoveryDelay (${this.settings.nodeRecoveryDelay} ms) ago`;
  }

  /** No majority decided: too few answers, or answers from nodes still in nodeRecoveryDelay (`recovering`), which count for nothing. */
  private undecided(operation: string, keys: LockRedisKeys, votes: ReadonlyArray<Vote<number> | undefined>, recovering: number): Error {
    if (recovering === 0) return this.fewAnswers(operation, keys, votes);
    const failure = firstFailure(votes);
    return new LockConnectionError(
      `Redlock ${operation} of "${keys.key}": ${count(votes)} of ${this.nodes.length} nodes answered, but ${recovering} of them ` +
        `${this.recentlyRestarted} and may have forgotten the lock, so no majority ` +
        `(${this.quorum}) decided.` +
        (operation === 'release' ? ' The lock was deleted on the nodes where it was ours; anything left lapses by TTL.' : '') +
        (failure ? ` First failure: ${failure.message}` : ''),
      operation,
      { cause: failure },
    );
  }

  /**
   * The health probe on every node at once (each bounded by its node timeout): the nodes that can
   * vote answered it and are past nodeRecoveryDelay, by the acquire's own rule. Fewer than a majority:
   * every acquire fails now, so the probe does. The round trip is that of the quorum-th fastest voter
   * (what an acquire waits for at best). Once a majority can vote, the rest get as long again as that took
   * (at least PROBE_GRACE_MS, at most their bound), not their whole bound: a frozen node must not make every health check take
   * the node timeout (a liveness probe with a 1 s timeout would restart a service whose locks work); a node
   * that did not answer by then is counted as not voting.
   */
  async probe(): Promise<StoreProbe> {
    const args = [this.probeKey, this.marker, HEALTH_PROBE_TTL_MS, this.recovery];
    const answers = await askAll(this.nodes, (node) => node.probe(args), undefined, {
      when: (v) => count(v, (a) => a.recoveringFor <= 0) >= this.quorum,
      minMs: Math.min(PROBE_GRACE_MS, this.settings.nodeTimeout),
    });
    const voters = answers.flatMap((a) => (a?.ok && a.value.recoveringFor <= 0 ? [a.value.ms] : [])).sort((a, b) => a - b);
    const nodes = { total: this.nodes.length, voting: voters.length };
    if (voters.length >= this.quorum) return { ms: voters[this.quorum - 1], nodes };
    return { error: this.tooFewVoters(answers, voters.length), nodes };
  }

  private tooFewVoters(answers: ReadonlyArray<Vote<{ recoveringFor: number }> | undefined>, voting: number): LockConnectionError {
    const recovering = answers.flatMap((a) => (a?.ok && a.value.recoveringFor > 0 ? [a.value.recoveringFor] : []));
    const failure = firstFailure(answers);
    const reasons: string[] = [];
    const silent = this.nodes.length - count(answers);
    if (silent > 0) reasons.push(`${silent} did not answer${failure ? ` (first failure: ${failure.message})` : ''}`);
    if (recovering.length > 0) {
      reasons.push(
        `${recovering.length} ${this.recentlyRestarted} ` + `and give no votes yet (the first votes again in ${Math.min(...recovering)} ms)`,
      );
    }
    return new LockConnectionError(
      `only ${voting} of ${this.nodes.length} Redlock nodes can vote, ${this.quorum} needed, so every acquire fails: ${reasons.join('; ')}.`,
      'health probe',
      { cause: failure },
    );
  }

  renewMany(requests: readonly RenewRequest[]): Promise<Array<boolean | Error>> {
    return Promise.all(
      requests.map((r) => this.renewOnMajority('renew', r.keys as LockRedisKeys, r.token, r.ttl, r.fence).catch((error: unknown) => error as Error)),
    );
  }

  /**
   * Owner-checked renewal on every node: true when a majority renewed, false when a majority said
   * not ours (no majority can be ours any more), else `LockConnectionError` (unknown: the watchdog
   * tries again within the lease and declares the loss at its deadline). Given the lock's `fence`
   * (watchdog, extend), a node where the key is free takes it back (REDLOCK_RENEW_SCRIPT).
   */
  private async renewOnMajority(operation: string, keys: LockRedisKeys, token: string, ttl: number, fence?: number): Promise<boolean> {
    const args = [keys.lock, keys.fence, token, String(ttl)];
    if (fence !== undefined) args.push(String(fence));
    const n = this.nodes.length;
    const votes = await askAll(
      this.nodes,
      (node) => node.run(REDLOCK_SCRIPTS.renew, operation, keys, args, isOne),
      (v) => count(v, (r) => r) >= this.quorum || count(v, (r) => !r) > n - this.quorum,
    );
    if (count(votes, (r) => r) >= this.quorum) return true;
    if (count(votes, (r) => !r) > n - this.quorum) return false;
    throw this.fewAnswers(operation, keys, votes);
  }

  private fewAnswers(operation: string, keys: LockRedisKeys | undefined, votes: ReadonlyArray<Vote<unknown> | undefined>): Error {
    const failure = firstFailure(votes);
    if (failure && failure instanceof DistributedLockError && !(failure instanceof LockConnectionError)) return failure;
    const what = keys ? ` of "${keys.key}"` : '';
    return new LockConnectionError(
      `Redlock ${operation}${what}: ${count(votes)} of ${this.nodes.length} nodes answered, a majority (${this.quorum}) was needed to decide.` +
        (failure ? ` First failure: ${failure.message}` : ''),
      operation,
      { cause: failure },
    );
  }

  /**
   * A node that restarts empty is trusted again after nodeRecoveryDelay, which is safe only if no
   * lease is longer: a longer ttl is refused rather than silently unprotected.
   */
  private assertTtl(option: string, ttl: number): void {
    assertWithinRecoveryDelay(option, ttl, this.settings.nodeRecoveryDelay);
  }

  private handoverArgs(keys: LockRedisKeys, token: string): CommandArg[] {
    return [keys.lock, keys.fence, keys.queue, keys.waiters, token, this.channelPrefix, fenceProposal()];
  }
}

/**
 * The last token a waiting attempt's answer saw on its node, when the answer left it a place there:
 * queued (busy), or granted (the lock is then given back with the place kept, or the attempt won).
 */
function placeAfterAttempt(reply: NodeAcquire): number | undefined {
  if (reply.kind === 'ours') return reply.fence;
  if (reply.kind === 'busy' && reply.position >= 0) return reply.lastFence;
  return undefined;
}

/** A give-back answers with the node's last token (after it, the place is the one it re-queued). */
function placeAfterGiveBack(reply: unknown): number | undefined {
  const lastFence = Number(reply);
  return Number.isSafeInteger(lastFence) && lastFence >= 0 ? lastFence : undefined;
}

/**
 * How a give-back leaves a node. `keep-place`: a waiter's, keeping its queue place (ticket); never sent again after a
 * reconnect, where it could run after a later attempt of the same acquisition. `holding`: a won lock's grants left out
 * of the count; the token still holds the lock, and a renewal may take that node back for it, so never sent again
 * either. `over`: the acquisition ended; one the node's connection refused is sent again once it is back (abandonOn).
 */
type GiveBackKind = 'keep-place' | 'holding' | 'over';

/** A won attempt: its fencing token and lease, and the granting nodes left out of the count (given back). */
interface Won {
  fence: number;
  validFor: number;
  uncounted: number[];
}

/** AcquireReply holderTtl: no owner holds a majority of the nodes (see LockStore). */
const NO_MAJORITY = -4;

const isOurs = (r: NodeAcquire): boolean => r.kind === 'ours';
const isBusy = (r: NodeAcquire): boolean => r.kind === 'busy';
const isOne = (reply: unknown): boolean => reply === 1;

/** Whether one other owner holds a majority of the nodes that answered (else the attempt saw a split vote). */
function someoneElseHasMajority(votes: ReadonlyArray<Vote<NodeAcquire> | undefined>, quorum: number): boolean {
  const held = new Map<string, number>();
  for (const v of votes) {
    if (!v?.ok || v.value.kind !== 'busy' || v.value.holder === '') continue;
    const n = (held.get(v.value.holder) ?? 0) + 1;
    if (n >= quorum) return true;
    held.set(v.value.holder, n);
  }
  return false;
}
