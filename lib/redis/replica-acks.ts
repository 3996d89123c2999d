import { LockConnectionError } from '../errors/lock-connection.error';
import { LockOptionsError } from '../errors/lock-options.error';
import type { CommandArg } from './lua-script';
import { isClusterClient } from './redis-connection';
import { unknownOutcome } from './unknown-outcome';

/**
 * `replicaAcks`: how many replicas must confirm (Redis WAIT) a write that grants or prolongs a
 * lease before the library relies on it. Replication is asynchronous: a lock the primary granted
 * but no replica has yet is gone after a failover, and the promoted replica grants it again while
 * the first holder still runs. A write confirmed by every replica survives whichever is promoted.
 */
export class ReplicaAcks {
  /** Arguments of `WAIT numreplicas timeout`. */
  readonly waitArgs: [CommandArg, CommandArg];

  constructor(
    readonly required: number,
    readonly timeoutMs: number,
  ) {
    this.waitArgs = [String(required), String(timeoutMs)];
  }

  /**
   * The error for a write the primary made but fewer than `required` replicas confirmed.
   * `operation`: 'acquire' (the caller gives the lock back) or 'renew' / 'extend' (the lease is not prolonged).
   */
  unconfirmed(operation: string, key: string, confirmed: number, connected: number | undefined): LockConnectionError {
    const shortOf = `only ${confirmed} of ${this.required} replicas confirmed it within ${this.timeoutMs} ms`;
    const consequence =
      operation === 'acquire'
        ? `Lock "${key}" was acquired on the primary, but ${shortOf}; not returned because a failover now could grant it twice. It is given back (owner-checked).`
        : `The ${operation} of lock "${key}" reached the primary, but ${shortOf}; the lease is not prolonged by it, so it will be reported lost at its deadline unless a later renewal is confirmed.`;
    const cause =
      connected !== undefined && connected < this.required
        ? ` The primary has fewer replicas connected than replicaAcks requires (requires ${this.required}, ${connected} connected): nothing can be confirmed until enough replicas are back (after a failover: until the old primary rejoins as a replica), or replicaAcks is lowered to the number of replicas you run.`
        : ` Check the replicas' health and lag (INFO replication), or raise replicaAckTimeout.`;
    return new LockConnectionError(consequence + cause, operation);
  }

  /** The health probe's write was confirmed by fewer replicas than `required`: every acquire fails so now. */
  unconfirmedProbe(confirmed: number): LockConnectionError {
    return new LockConnectionError(
      `the health probe's write was confirmed by only ${confirmed} of ${this.required} replicas within ${this.timeoutMs} ms (replicaAcks), ` +
        'so every acquire fails now. Check the replicas (INFO replication on the primary).',
      'health probe',
    );
  }
}

/**
 * The error of a call with replicaAcks that ran out of `commandTimeout`. WAIT blocks the connection it runs
 * on, so while replicas do not confirm, the calls of one service queue behind each other's WAIT (each up to
 * replicaAckTimeout): Redis may be answering, just not this call yet.
 */
export function timedOutBehindWaits(acks: ReplicaAcks, operation: string, commandTimeout: number, cause: unknown): LockConnectionError {
  return new LockConnectionError(
    `Redis did not answer ${operation} within ${commandTimeout} ms. With replicaAcks (${acks.required}), every lock call ends with a WAIT that ` +
      `blocks this service's connection for up to replicaAckTimeout (${acks.timeoutMs} ms) while replicas do not confirm, so concurrent calls ` +
      `queue behind each other's WAIT: check the replicas (INFO replication on the primary); otherwise Redis is unreachable, frozen or ` +
      `overloaded. ${unknownOutcome(operation)}`,
    operation,
    { cause },
  );
}

/** `connected_slaves` of an INFO replication reply. */
export function connectedReplicasOf(info: string): number | undefined {
  const match = /^connected_slaves:(\d+)/m.exec(info);
  return match ? Number(match[1]) : undefined;
}

/**
 * WAIT confirms the writes of one connection to one primary's replicas: a Cluster client spreads
 * locks over several primaries (not supported). Checked before any connection is made.
 */
export function assertReplicaAcksSupported(redis: unknown, replicaAcks: number): void {
  if (replicaAcks > 0 && isClusterClient(redis)) {
    throw new LockOptionsError(
      'replicaAcks',
      'is not supported with a Redis Cluster client; use a single primary with replicas (e.g. under Sentinel), or leave it 0.',
    );
  }
}
