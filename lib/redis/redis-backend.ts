import type { LockBackend, LockBackendContext, LockBackendFactory } from '../core/lock-backend';
import { refusedAtStartup } from './permission-check';
import { assertRedisOption } from '../options/connection-option';
import { reportConnectionHealth } from './connection-health';
import { ConnectionState } from './connection-state';
import type { Redis } from 'ioredis';
import type { LockOptionsError } from '../errors/lock-options.error';
import { withDeadline } from '../time/deadline';
import { warnIfEvicting } from './eviction-warning';
import { isSentinelInfo, sentinelAtStartup } from './sentinel-misdirection';
import { replicaAtStartup, replicaConnected, replicatedPrimary } from './replica-misdirection';
import {
  type RedisClient,
  RedisConnection,
  closeConnection,
  closeNow,
  connectTimeoutFor,
  createRedisConnection,
  isClusterClient,
  socketOf,
  waitUntilReady,
} from './redis-connection';
import { RedisLockStore } from './redis-lock-store';
import { RedlockBackend } from './redlock';
import { ReplicaAcks } from './replica-acks';
import { WakeChannel } from './wake-channel';
import { WakeRoute } from './wake-route';
import { userClientRefusal } from './user-client-refusal';

/**
 * The production backend: one Redis connection (the user's, or one the module owns), its store and
 * its wake channel; with `nodes`, Redlock over independent masters (lib/redis/redlock).
 */
export const redisBackend: LockBackendFactory = (context) =>
  context.options.nodes !== undefined ? new RedlockBackend(context) : new RedisBackend(context);

class RedisBackend implements LockBackend {
  readonly store: RedisLockStore;
  readonly wakeChannel: WakeChannel;
  readonly confirmsHandovers: boolean;
  private readonly connection: RedisConnection;
  private readonly connectionState: ConnectionState;
  private readonly route: WakeRoute;
  /** The connection (socket) last found to be a replica's and logged (see replicaRefusal). */
  private loggedReplicaOf?: unknown;

  get location(): string {
    const db = (this.connection.client.options as { db?: number }).db;
    return db ? `${this.connectionState.target} db ${db}` : this.connectionState.target;
  }

  constructor(private readonly context: LockBackendContext) {
    const { options, settings, serviceId, logger, shutdown } = context;
    assertRedisOption(options, settings, 'required');
    this.connection = createRedisConnection(options.redis!, settings.commandTimeout);
    const { client, owned } = this.connection;
    try {
      this.connectionState = new ConnectionState(client, owned);
    } catch (error) {
      // Nobody could close a connection made by a constructor that throws: it would keep the process alive.
      if (owned) closeNow(client);
      throw error;
    }
    if (owned) reportConnectionHealth(client, this.connectionState, logger, shutdown);
    if (!isClusterClient(client) && !viaSentinels(client)) {
      this.connectionState.checkEachConnection(() => this.replicaRefusal(client, settings.commandTimeout));
    }
    const { keyPrefix, commandTimeout, waiterLease, replicaAcks, replicaAckTimeout } = settings;
    const acks = replicaAcks > 0 ? new ReplicaAcks(replicaAcks, replicaAckTimeout) : undefined;
    this.confirmsHandovers = acks !== undefined;
    // Plain pub/sub on a single Redis; on a Cluster, sharded when every master has it (asked once, at startup).
    const route = (this.route = new WakeRoute(client, keyPrefix, commandTimeout));
    this.store = new RedisLockStore(client, keyPrefix, commandTimeout, waiterLease, acks, this.connectionState, route);
    this.wakeChannel = new WakeChannel(client, route, serviceId, commandTimeout, logger);
    if (route.mode === undefined) void route.detect();
  }

  /**
   * Startup: with `requireRedisAtStartup`, waits up to `startupTimeout` for the first connection and
   * rejects when none comes (the engine then closes). Without it, startup goes on at once: each call
   * waits for the first connection within its own `commandTimeout`.
   */
  async ready(): Promise<void> {
    const { requireRedisAtStartup, startupTimeout, commandTimeout } = this.context.settings;
    const { client, owned } = this.connection;
    // Not a question of reachability: no lock call could go through such a client, required or not.
    const unusable = this.refusalOfUserClient();
    if (unusable) throw unusable;
    // Our connection opens at startup (made lazily: see createRedisConnection), required or not.
    if (owned && client.status === 'wait') client.connect().catch(() => undefined);
    if (!requireRedisAtStartup) {
      if (!owned && client.status !== 'wait') void this.reportIfNeverReady(connectTimeoutFor(commandTimeout));
      return;
    }
    // A client of the user's made with lazyConnect connects on its first command; startup is that moment.
    if (client.status === 'wait') client.connect().catch(() => undefined);
    if (!(await this.untilReadyOrClosed(startupTimeout)))
      throw this.refusalOfUserClient() ?? this.connectionState.notReachableAtStartup(startupTimeout);
    if (!isClusterClient(client)) {
      const checked = socketOf(client);
      await this.refuseWrongServer(client, commandTimeout);
      // The connection startup checked is not checked again before the first lock call.
      this.connectionState.passedCheck(checked);
    }
    await this.refuseWithoutPermission();
    // Handed over while its quit() was still on the way (status still 'ready'): the questions above failed quietly.
    const closed = this.refusalOfUserClient();
    if (closed) throw closed;
    // A Cluster: know how handovers travel before the first release (bounded; on failure, asked again later).
    if (this.route.mode === undefined) await this.route.detect();
    void this.warnIfEvicting();
  }

  /**
   * The check of each new connection (ConnectionState.checkEachConnection): the startup's replica check, for a connection
   * startup did not check (requireRedisAtStartup: false) or one made by a reconnect. Bounded by half the commandTimeout,
   * so the calls waiting for it still have time to be sent; a server that does not answer INFO in time, or refuses it, is
   * taken as it is (as at startup). Said once per refused connection in the log.
   */
  private async replicaRefusal(client: Redis, commandTimeout: number): Promise<((operation: string) => Error) | undefined> {
    const info = await infoWithin(client, 'replication', Math.max(1, Math.floor(commandTimeout / 2)));
    const primary = info === undefined ? undefined : replicatedPrimary(info);
    const target = this.connectionState.target;
    if (primary === undefined) {
      this.loggedReplicaOf = undefined;
      return undefined;
    }
    const socket = socketOf(client);
    if (this.loggedReplicaOf !== socket) {
      this.loggedReplicaOf = socket;
      this.context.logger.error(replicaConnected(target, primary, 'lock calls').message);
    }
    return (operation) => replicaConnected(target, primary, operation);
  }

  /** Why a client the user passed can serve no lock call (user-client-refusal.ts); never about a connection of ours. */
  private refusalOfUserClient(): LockOptionsError | undefined {
    return this.connection.owned ? undefined : userClientRefusal(this.connection.client);
  }

  /**
   * waitUntilReady, but a client of the user's that ends meanwhile (closed by its owner: ioredis does not open it
   * again by itself) ends the wait at once instead of after the whole startupTimeout.
   */
  private async untilReadyOrClosed(timeoutMs: number): Promise<boolean> {
    const { client, owned } = this.connection;
    if (owned) return waitUntilReady(client, timeoutMs);
    let onEnd!: () => void;
    const ended = new Promise<boolean>((resolve) => client.once('end', (onEnd = () => resolve(false))));
    try {
      return await Promise.race([waitUntilReady(client, timeoutMs), ended]);
    } finally {
      client.off('end', onEnd);
    }
  }

  /**
   * A Sentinel answers PING, INFO and SUBSCRIBE like a primary, and a replica even the permission check (a read), so a
   * service given a Sentinel's or a replica's address started and then failed every lock call. Their INFO says so:
   * asked once at startup, bounded; a server that does not answer it in time or refuses it (an ACL user without INFO)
   * is taken as it is, and the lock calls will tell. Through Sentinels, ioredis itself checks that it reached the
   * primary (and role 'slave' is refused with the options).
   */
  private async refuseWrongServer(client: Redis, commandTimeout: number): Promise<void> {
    const [server, replication] = await Promise.all([
      infoWithin(client, 'server', commandTimeout),
      viaSentinels(client) ? undefined : infoWithin(client, 'replication', commandTimeout),
    ]);
    if (server !== undefined && isSentinelInfo(server)) throw sentinelAtStartup(this.connectionState.target);
    const primary = replication === undefined ? undefined : replicatedPrimary(replication);
    if (primary !== undefined) throw replicaAtStartup(this.connectionState.target, primary);
  }

  /**
   * A Redis user whose ACL refuses what every lock call does (a script on the lock keys: no +@scripting,
   * no TIME, keys outside its patterns) would start, and fail every acquire as long as it runs: like a
   * Sentinel's address, a misconfiguration that no retry outlives, so the application does not start.
   */
  private async refuseWithoutPermission(): Promise<void> {
    const refusal = await this.store.aclRefusal();
    if (refusal) throw refusedAtStartup(this.connectionState.target, refusal, 'connect');
  }

  /** Every server holding locks (a Cluster's masters), asked once after startup without holding it up (eviction-warning.ts). */
  private async warnIfEvicting(): Promise<void> {
    const { client } = this.connection;
    const servers: Array<{ target: string; node: Pick<Redis, 'info'> }> = isClusterClient(client)
      ? client.nodes('master').map((node) => ({ target: `Redis at ${node.options.host}:${node.options.port}`, node }))
      : [{ target: this.connectionState.target, node: client }];
    const { commandTimeout } = this.context.settings;
    await Promise.all(
      servers.map(
        ({ target, node }) =>
          withDeadline(node.info('memory'), commandTimeout, () => new Error('no answer'))
            .then((info) => warnIfEvicting(target, info, this.context.logger))
            .catch(() => undefined), // INFO refused or not answered: nothing to tell
      ),
    );
  }

  /** A connection we own logs its failed attempts itself (connection-health.ts); a user's client gets this one line. */
  private async reportIfNeverReady(waitMs: number): Promise<void> {
    if (await waitUntilReady(this.connection.client, waitMs)) return;
    if (this.context.shutdown.aborted) return;
    this.context.logger.error(
      `${this.connectionState.target} is not reachable: no connection within ${waitMs} ms of startup. ` +
        `Lock calls fail with LockConnectionError until it is; check the redis option and that the server is running.`,
    );
  }

  async close(): Promise<void> {
    this.store.close();
    await this.wakeChannel.close();
    if (this.connection.owned) await closeConnection(this.connection.client, this.context.settings.shutdownTimeout);
  }
}

/** A client that reaches its primary through Sentinels: ioredis itself checks the role of what it connects to. */
function viaSentinels(client: RedisClient): boolean {
  const { sentinels } = (client as Redis).options;
  return sentinels !== undefined && sentinels !== null;
}

/** `INFO section`, or undefined when the server does not answer it within `ms` or refuses it: the checks then take it as it is. */
function infoWithin(client: Redis, section: string, ms: number): Promise<string | undefined> {
  return withDeadline(client.info(section), ms, () => new Error('no answer')).catch(() => undefined);
}
