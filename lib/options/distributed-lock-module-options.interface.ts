import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { DeferModuleOptions } from './defer-options.interface';
import type { LockOptions } from './lock-options.interface';

/** `redis` accepts a URL, ioredis options, or a client you created (which the module never closes). */
export type RedisConnectionOption = string | RedisOptions | Redis | Cluster;

/** Module-wide defaults of every LockOptions field except `name`, which names one kind of lock. */
export interface DistributedLockModuleOptions extends Omit<LockOptions, 'name'> {
  /** Where locks live. A URL or options make a connection the module owns; an instance stays yours. */
  redis: RedisConnectionOption;
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
