import { LockConnectionError } from '../errors/lock-connection.error';

/**
 * The primary a replica replicates from (`master_host:master_port` of its `INFO replication`), or undefined when the
 * server is no replica (`role:master`, or no such section: a Sentinel, a server that refused INFO).
 */
export function replicatedPrimary(info: string): string | undefined {
  if (!/^role:slave\b/m.test(info)) return undefined;
  const host = /^master_host:(.*)$/m.exec(info)?.[1]?.trim();
  const port = /^master_port:(\d+)/m.exec(info)?.[1];
  return host && port ? `${host}:${port}` : 'its primary';
}

/**
 * Startup on a replica's address (requireRedisAtStartup): a replica answers PING, INFO and even the startup's
 * read-only permission check like a primary, so the application started and every lock call (each a write) failed
 * with READONLY, told as a server to check. A writable replica (`replica-read-only no`) is no better: what it
 * grants is overwritten by its primary's stream, and services locking on the primary never see it.
 */
export function replicaAtStartup(target: string, primary: string): LockConnectionError {
  return new LockConnectionError(
    `${isAReplica(target, primary)}: it refuses every lock write (READONLY), and locks held there would not exclude those ` +
      `held on its primary. ${USE_THE_PRIMARY}`,
    'startup',
  );
}

/**
 * A connection made without the startup check (requireRedisAtStartup: false), or after a reconnect, reached a
 * replica (a DNS name or proxy now pointing at one). A writable replica (`replica-read-only no`) granted locks there
 * that services on its primary never saw; a read-only one failed every call with READONLY, told as a server to check.
 */
export function replicaConnected(target: string, primary: string, operation: string): LockConnectionError {
  return new LockConnectionError(
    `Redis ${operation} not sent: ${isAReplica(target, primary)}. Locks held on a replica would not exclude those held on ` +
      `its primary, so no lock call goes through this connection; it is checked again every second and at each reconnect. ` +
      USE_THE_PRIMARY,
    operation,
  );
}

const isAReplica = (target: string, primary: string): string =>
  `${target} is a replica (INFO replication: role:slave, replicating ${primary}), not a primary`;

/** What to do about a replica's address, in either message. */
const USE_THE_PRIMARY =
  "Point the redis option at the primary; with Sentinel, give ioredis the Sentinels and the primary's name " +
  "(redis: { sentinels: [...], name: 'mymaster' }), which follows the primary across failovers.";
