import type { Logger } from '@nestjs/common';
import type { ConnectionState } from './connection-state';
import type { RedisClient } from './redis-connection';

/**
 * Logs the state of a connection the module owns, once per change: ioredis reports trouble as an
 * 'error' event per reconnect attempt (printed raw when nobody listens). A server never reached is
 * "not reachable" (a wrong address or a server not started), one that was reached and went away
 * is "lost" (it is being re-established): they call for different fixes. Quiet once `closed`.
 */
export function reportConnectionHealth(client: RedisClient, state: ConnectionState, logger: Logger, closed: AbortSignal): void {
  let healthy = true;
  let reachedBefore = state.connectedBefore;
  // Before the first connection, each failed attempt is an 'error' event (ECONNREFUSED, ETIMEDOUT, …).
  client.on('error', (error: Error) => {
    if (!healthy || closed.aborted || state.connectedBefore) return;
    healthy = false;
    logger.warn(
      `${state.target} is not reachable (${error.message}); lock calls fail with LockConnectionError until it is. ` +
        `Check the redis option and that the server is running.`,
    );
  });
  // A connection that worked ends with 'close', with or without an 'error' first (a server that exits closes it cleanly).
  client.on('close', () => {
    if (!healthy || closed.aborted || !state.connectedBefore) return;
    healthy = false;
    const reason = state.reason || ' (closed by the server or the network)';
    logger.warn(
      `Redis connection to ${address(state)} lost${reason}; it is being re-established, and lock calls fail with LockConnectionError until it is back.`,
    );
  });
  client.on('ready', () => {
    const first = !reachedBefore;
    reachedBefore = true;
    if (healthy) return;
    healthy = true;
    logger.log(first ? `${state.target} is reachable now; lock calls work.` : `Redis connection to ${address(state)} is back.`);
  });
}

/** `127.0.0.1:6379` out of `Redis at 127.0.0.1:6379` (other targets are named whole). */
const address = (state: ConnectionState): string => state.target.replace(/^Redis at /, '');
