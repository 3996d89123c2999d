import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { DeferModuleOptions } from './defer-options.interface';
import type { LockOptions } from './lock-options.interface';

/** `redis` accepts a URL, ioredis options, or a client you created (which the module never closes). */
export type RedisConnectionOption = string | RedisOptions | Redis | Cluster;

/** Module-wide defaults of every LockOptions field except `name`, which names one kind of lock. */
export interface DistributedLockModuleOptions extends Omit<LockOptions, 'name' | 'signal'> {
  /**
   * Where locks live. A URL or options make a connection the module owns; an instance stays yours.
   * Required unless `nodes` is given (never both).
   */
  redis?: RedisConnectionOption;
  /**
   * Redlock mode, instead of `redis`: an odd number (3, 5, …) of independent Redis masters (URLs,
   * ioredis options or clients, never a Cluster or two entries for one server). Every operation runs
   * on all of them and counts a majority: a lock survives the loss of a minority of the nodes.
   * Fencing tokens stay strictly increasing (one extra round trip per acquisition).
   * @default undefined (one Redis: `redis`)
   */
  nodes?: ReadonlyArray<string | RedisOptions | Redis>;
  /**
   * Redlock mode: a node that restarted without its data (no persistence) gives no votes for this
   * many ms after it is first used again, so it cannot grant a lock it forgot while that lease may
   * still run. Must be at least every lease (module, per-call or `extend` ttl); a longer ttl is
   * refused. 0 turns it off (only safe with `appendonly yes` and `appendfsync always` on every node).
   * A brand-new node is indistinguishable from a restarted one: a new deployment waits this once.
   * @default the module's ttl, or its minHold if larger (every lease must fit in it)
   */
  nodeRecoveryDelay?: number;
  /**
   * Namespace of every Redis key (and channel) the module writes. No `{` or `}` (they would pick the
   * Cluster slot instead of each lock's own hash tag) and no lone UTF-16 surrogate. @default 'lock:'
   */
  keyPrefix?: string;
  /** Bound of every Redis call in ms; a slower answer is a `LockConnectionError`. @default 2000 */
  commandTimeout?: number;
  /**
   * A queued waiter that has not refreshed its place for this many ms (crashed, paused) is skipped.
   * Live waiters refresh every third of it. @default 3000
   */
  waiterLease?: number;
  /**
   * How long shutdown waits, in ms, for work under held locks to finish and release them (their
   * `signal` aborts, the leases stay renewed) and for acquisitions in flight to settle; work still
   * running after it keeps its keys until their leases lapse. Also bounds closing the connection.
   * @default 5000
   */
  shutdownTimeout?: number;
  /**
   * Replicas that must confirm (Redis `WAIT`) every acquire, extend and watchdog renewal before it
   * counts. 0 (off): a lock the primary granted but had not replicated yet can be granted again
   * after a failover. With n: an acquire fewer replicas confirmed is given back and rejected with
   * `LockConnectionError`, and an unconfirmed renewal does not prolong the lease. Set it to the
   * number of replicas you run: any one of them may be promoted, and `WAIT 1` with two replicas
   * says nothing about the one that is. Adds no round trip (WAIT goes in the same write); single
   * Redis (Sentinel) only, not Redis Cluster. Integer 0 … 100. @default 0
   */
  replicaAcks?: number;
  /** How long each confirmation waits for `replicaAcks` replicas, in ms; below `commandTimeout`. @default 500 */
  replicaAckTimeout?: number;
  /**
   * Whether application startup (`app.init()`, `app.listen()`) fails when Redis cannot be reached, as
   * TypeORM and Mongoose fail it for their database: startup waits up to `startupTimeout` for the first
   * connection, then rejects with a `LockConnectionError` naming the address (and closes the connection
   * the module made). `false`: startup does not wait; lock calls fail with `LockConnectionError` until
   * Redis is reachable and work from the moment it is. @default true
   */
  requireRedisAtStartup?: boolean;
  /** How long startup waits for the first connection to Redis, in ms (with `requireRedisAtStartup`). @default 10000 */
  startupTimeout?: number;
  /**
   * Whether lock errors thrown by HTTP route handlers become HTTP answers: 409 Conflict for a busy key
   * or a wait that timed out, 503 Service Unavailable for Redis trouble or an instance shutting down,
   * each with `Retry-After`. `false`: they reach your exception filters as the typed errors (a 500
   * unless a filter of yours maps them). Guards and middleware need `LockHttpErrorsFilter` either way.
   * @default true
   */
  httpErrors?: boolean;
  /**
   * The durable queue behind `@Locked(…, { onBusy: 'defer' })` (BullMQ, an optional peer dependency, loaded only
   * when this is set). Every instance enqueues; each runs a worker unless `worker: false`.
   * @default undefined (no queue: a method with onBusy 'defer' fails startup)
   */
  defer?: DeferModuleOptions;
}
