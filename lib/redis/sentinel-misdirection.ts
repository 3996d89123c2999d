import { LockConnectionError } from '../errors/lock-connection.error';

/**
 * A Redis Sentinel accepts connections, PING, INFO and SUBSCRIBE like a primary, so a client
 * pointed at a Sentinel's port looks healthy until the first lock call, which Sentinel rejects with
 * "unknown command 'evalsha'" (a primary always has these commands). Said plainly instead:
 */
const SENTINEL_REJECTION = /^ERR unknown command '(eval|evalsha|exists|wait|set)'/i;

const CONFIGURE_SENTINELS =
  `Give ioredis the Sentinels and the name they monitor the primary under instead of a Sentinel's address, ` +
  `e.g. redis: { sentinels: [{ host: '10.0.0.5', port: 26379 }], name: 'mymaster' }; ` +
  `ioredis then asks them where the primary is and follows it across failovers.`;

/** The error for a connection that reached a Sentinel instead of a primary, or undefined for any other failure. */
export function sentinelMisdirection(operation: string, error: unknown): LockConnectionError | undefined {
  const message = error instanceof Error ? error.message : String(error);
  const match = SENTINEL_REJECTION.exec(message);
  if (!match) return undefined;
  return new LockConnectionError(
    `Redis ${operation} failed: the server answered "unknown command '${match[1]}'", which is what a Redis Sentinel answers: ` +
      `the connection reached a Sentinel, not a primary. ${CONFIGURE_SENTINELS}`,
    operation,
    { cause: error },
  );
}

/** `INFO server` of a Redis Sentinel: it says `redis_mode:sentinel`. */
export const isSentinelInfo = (info: string): boolean => /^redis_mode:sentinel\b/m.test(info);

/** Startup on a Sentinel's port (requireRedisAtStartup): refused at once rather than failing every lock call after. */
export function sentinelAtStartup(target: string): LockConnectionError {
  return new LockConnectionError(
    `${target} is a Redis Sentinel (INFO server: redis_mode:sentinel), not a primary. ${CONFIGURE_SENTINELS}`,
    'startup',
  );
}
