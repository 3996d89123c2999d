import { warnIfEvicting } from '../eviction-warning';
import { ReplyError } from 'ioredis';
import type { LockBackend, LockBackendContext } from '../../core/lock-backend';
import { LockConnectionError } from '../../errors/lock-connection.error';
import { refusedAtStartup } from '../permission-check';
import { LockOptionsError } from '../../errors/lock-options.error';
import { reportConnectionHealth } from '../connection-health';
import { closeConnection, closeNow, waitUntilReady } from '../redis-connection';
import { WakeChannel } from '../wake-channel';
import { WakeRoute } from '../wake-route';
import { quorumOf } from './quorum';
import { RedlockNode } from './redlock-node';
import { resolveRedlockSettings } from '../../options/redlock-options';
import { RedlockStore } from './redlock-store';
import { RedlockWakeChannel } from './redlock-wake-channel';
import { runIdOf, sameServerRefusal } from './same-server';

/** The Redlock backend: N independent Redis masters (`nodes`), a majority decides every operation. */
export class RedlockBackend implements LockBackend {
  readonly store: RedlockStore;
  readonly wakeChannel: RedlockWakeChannel;
  readonly confirmsHandovers = false;
  private readonly nodes: RedlockNode[];

  get location(): string {
    return `Redlock (${this.nodes.map((n) => n.target).join(', ')})`;
  }
  private readonly nodeRecoveryDelay: number;
  /** The node each server (by run_id) was first seen as: see refuseSameServer. */
  private readonly serverOf = new Map<string, RedlockNode>();

  constructor(private readonly context: LockBackendContext) {
    const { options, settings, serviceId, logger, shutdown } = context;
    const redlock = resolveRedlockSettings(options, settings);
    this.nodeRecoveryDelay = redlock.nodeRecoveryDelay;
    this.nodes = [];
    try {
      for (const option of redlock.nodes) this.nodes.push(new RedlockNode(option, settings.commandTimeout, redlock.nodeTimeout));
    } catch (error) {
      // Nobody could close the nodes already connected: a constructor that throws returns no backend.
      for (const node of this.nodes) if (node.owned) closeNow(node.client);
      throw error;
    }
    for (const node of this.nodes) if (node.owned) reportConnectionHealth(node.client, node.state, logger, shutdown);
    this.store = new RedlockStore(this.nodes, {
      keyPrefix: settings.keyPrefix,
      waiterLease: settings.waiterLease,
      nodeRecoveryDelay: redlock.nodeRecoveryDelay,
      nodeTimeout: redlock.nodeTimeout,
    });
    // Every node is one plain Redis (a Cluster is refused), so each channel is the service's plain one.
    this.wakeChannel = new RedlockWakeChannel(
      this.nodes.map(
        (node) =>
          new WakeChannel(
            node.client,
            new WakeRoute(node.client, settings.keyPrefix, redlock.nodeTimeout, 'plain'),
            serviceId,
            redlock.nodeTimeout,
            logger,
          ),
      ),
      this.store,
      redlock.nodeTimeout,
    );
  }

  /**
   * With `requireRedisAtStartup`: waits up to `startupTimeout` for a majority of the nodes, and
   * refuses nodes that are members of a Redis Cluster (they shard keys; they are not independent) or whose
   * user the ACL refuses the lock scripts (they never vote).
   */
  async ready(): Promise<void> {
    const { requireRedisAtStartup, startupTimeout } = this.context.settings;
    // Our connections open at startup (made lazily: see createRedisConnection); a user's lazy client when startup waits for it.
    for (const node of this.nodes) {
      if (node.client.status === 'wait' && (node.owned || requireRedisAtStartup)) node.client.connect().catch(() => undefined);
    }
    if (!requireRedisAtStartup) return this.checkEachNodeOnceUp(this.nodes, startupTimeout);
    const quorum = quorumOf(this.nodes.length);
    const ready = await this.majorityReady(startupTimeout, quorum);
    if (ready.length < quorum) {
      const down = this.nodes.filter((n) => !ready.includes(n)).map((n) => n.target);
      throw new LockConnectionError(
        `Redlock: only ${ready.length} of ${this.nodes.length} nodes were reachable within ${startupTimeout} ms of startup, ${quorum} needed. ` +
          `Not reachable: ${down.join(', ')}. Check the nodes option and that the servers are running.`,
        'startup',
      );
    }
    await Promise.all(ready.map((node) => this.refuseClusterNode(node)));
    await this.refuseSameServer(ready);
    await Promise.all(ready.map((node) => this.refuseWithoutPermission(node)));
    this.checkEachNodeOnceUp(
      this.nodes.filter((node) => !ready.includes(node)),
      startupTimeout,
    );
    if (this.nodeRecoveryDelay > 0) await Promise.all(ready.map((node) => this.warnWithoutUptime(node)));
  }

  /**
   * The checks startup could not wait for, run on each node once it connects (bounded by `timeoutMs`),
   * without holding startup up: a Redis Cluster member among `unchecked` is refused its votes (a node connecting after the majority,
   * or any node when startup does not wait for Redis; the error is logged, as startup can no longer fail), and an
   * evicting node is warned about (eviction-warning.ts; every node's, those of the majority too).
   */
  private checkEachNodeOnceUp(unchecked: readonly RedlockNode[], timeoutMs: number): void {
    for (const node of this.nodes) {
      const late = unchecked.includes(node);
      void waitUntilReady(node.client, timeoutMs)
        .then(async (up) => {
          if (!up) return;
          if (late) await this.refuseClusterNode(node);
          if (late) await this.refuseSameServer([node]);
          warnIfEvicting(`Redlock: ${node.target}`, await node.info('memory'), this.context.logger);
        })
        .catch((error: unknown) => {
          if (!(error instanceof LockOptionsError)) return; // INFO refused or not answered: nothing to tell
          node.refuse(error.message);
          this.context.logger.error(`${error.message} It connected after startup, so it is not refused there: its votes never count.`);
        });
    }
  }

  /**
   * The acquire script reads a node's uptime to tell a restart from an older snapshot (its marker key
   * comes back with it). A server that refuses INFO to us (renamed, or denied by ACL) refuses it to
   * the script too, which then goes by the marker alone: said once, at startup, rather than never.
   */
  private async warnWithoutUptime(node: RedlockNode): Promise<void> {
    let info: string | undefined;
    let refusal = 'it has no uptime_in_seconds';
    try {
      info = await node.info('server');
    } catch (error) {
      const reply = serverRefusal(error);
      if (reply === undefined) return;
      refusal = reply;
    }
    if (info && /^uptime_in_seconds:\d+/m.test(info)) return this.warnWithoutLastSave(node);
    this.context.logger.warn(
      `Redlock: ${node.target} does not answer INFO server (${refusal}). A node restarted from an older snapshot (RDB, or an AOF ` +
        `fsynced every second) then votes at once although it forgot recent locks; only a node restarted empty waits nodeRecoveryDelay. ` +
        `Allow INFO to this user, or run every node with appendonly yes + appendfsync always.`,
    );
  }

  /**
   * The acquire script reads the uptime only within nodeRecoveryDelay of the node's start or last save, which
   * LASTSAVE tells (redlock-recovery in docs/design.md). A user allowed INFO but not LASTSAVE (an ACL without
   * @admin) reads the uptime on every acquire instead: as safe, costlier, so said once.
   */
  private async warnWithoutLastSave(node: RedlockNode): Promise<void> {
    try {
      await node.lastSave();
    } catch (error) {
      const refusal = serverRefusal(error);
      if (refusal === undefined) return;
      this.context.logger.warn(
        `Redlock: ${node.target} does not answer LASTSAVE (${refusal}), so every acquire reads the node's uptime ` +
          `(INFO server: about 8 µs of its CPU per acquire) instead of only after a restart or a save. Allow LASTSAVE to this user (+lastsave).`,
      );
    }
  }

  /** Resolves with the nodes ready once a majority is (the rest connect on their own), or after `timeoutMs`. */
  private majorityReady(timeoutMs: number, quorum: number): Promise<RedlockNode[]> {
    return new Promise((resolve) => {
      const ready: RedlockNode[] = [];
      let pending = this.nodes.length;
      for (const node of this.nodes) {
        void waitUntilReady(node.client, timeoutMs).then((ok) => {
          pending--;
          if (ok) ready.push(node);
          if (ready.length >= quorum || pending === 0) resolve([...ready]);
        });
      }
    });
  }

  /**
   * A node whose user the ACL refuses what every lock call does (no +@scripting, no TIME, keys outside its
   * patterns) never votes: like a Cluster node among the nodes, a misconfiguration no retry outlives, so
   * startup fails naming the grant (permission-check.ts).
   */
  private async refuseWithoutPermission(node: RedlockNode): Promise<void> {
    const refusal = await node.aclRefusal(this.context.settings.keyPrefix);
    if (refusal) throw refusedAtStartup(`Redlock: ${node.target}`, refusal, 'startup');
  }

  /**
   * Nodes that are one server behind different addresses (same-server.ts); the options could only compare the
   * addresses. Checked in the order of `nodes`, against every node checked before (a node connecting late too); a
   * node that does not answer INFO now is checked by nobody.
   */
  private async refuseSameServer(nodes: readonly RedlockNode[]): Promise<void> {
    const runIds = await Promise.all(nodes.map((node) => node.info('server').then(runIdOf, () => undefined)));
    const checked = [...nodes].map((node, i) => ({ node, runId: runIds[i] })).sort((a, b) => this.indexOf(a.node) - this.indexOf(b.node));
    for (const { node, runId } of checked) {
      if (runId === undefined) continue;
      const earlier = this.serverOf.get(runId);
      if (earlier && earlier !== node) throw sameServerRefusal(this.indexOf(node), node.target, this.indexOf(earlier), earlier.target, runId);
      this.serverOf.set(runId, node);
    }
  }

  private indexOf(node: RedlockNode): number {
    return this.nodes.indexOf(node);
  }

  private async refuseClusterNode(node: RedlockNode): Promise<void> {
    let info: string;
    try {
      info = await node.info('cluster');
    } catch {
      return; // a node that cannot answer now is checked by nobody; its calls fail on their own
    }
    if (/^cluster_enabled:1\b/m.test(info)) {
      throw new LockOptionsError(
        'nodes',
        `${node.target} is a Redis Cluster node. Redlock needs independent masters, each with its own copy of every lock; ` +
          "a Cluster's nodes shard keys between them. Pass the Cluster as 'redis' instead, or use standalone servers as nodes.",
      );
    }
  }

  async close(): Promise<void> {
    this.store.close();
    await this.wakeChannel.close();
    const { shutdownTimeout } = this.context.settings;
    await Promise.all(this.nodes.filter((n) => n.owned).map((n) => closeConnection(n.client, shutdownTimeout)));
  }
}

/**
 * The server's own error reply behind a failed node call (a command renamed, or denied by ACL), or undefined:
 * only a refusal says anything about the node; a node not answering now (a timeout, a lost connection) does not.
 */
function serverRefusal(error: unknown): string | undefined {
  const reply = (error as { cause?: unknown }).cause;
  return reply instanceof ReplyError ? (reply as Error).message : undefined;
}
