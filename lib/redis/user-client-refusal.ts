import { LockConnectionError } from '../errors/lock-connection.error';
import { LockOptionsError } from '../errors/lock-options.error';
import { isClusterClient, type RedisClient } from './redis-connection';

const OWN_CLIENT = 'give the module a client of its own (yourClient.duplicate(), or a URL or ioredis options)';

/**
 * A client you pass that no lock call can go through, refused when the application starts rather than by every call
 * after it:
 * - closed (status `end`: `quit()` or `disconnect()` was called on it, or its `retryStrategy` gave up): ioredis opens
 *   it again only when told to, so startup waited its whole startupTimeout and then blamed an unreachable server;
 * - in subscriber mode (`subscribe()` was called on it): Redis takes nothing but (un)subscribing on such a connection,
 *   so startup passed and every lock call failed with "Connection in subscriber mode", as something to retry.
 */
export function userClientRefusal(client: RedisClient): LockOptionsError | undefined {
  if (client.status === 'end') {
    return new LockOptionsError(
      'redis',
      'the client given is closed (status "end": quit() or disconnect() was called on it, or its retryStrategy gave up reconnecting), ' +
        'and ioredis does not open it again by itself, so no lock call could be sent. Pass an open client, and close it only after the application ' +
        `(the module never closes a client you pass); or ${OWN_CLIENT}.`,
    );
  }
  if (inSubscriberMode(client)) {
    return new LockOptionsError(
      'redis',
      'the client given is in subscriber mode (subscribe() or psubscribe() was called on it): Redis takes no other command on that connection, ' +
        `so every lock call would fail. Keep subscriptions on a connection of their own, or ${OWN_CLIENT}.`,
    );
  }
  return undefined;
}

/** ioredis' refusal of a command on a connection in subscriber mode, said as what to change; undefined for any other failure. */
export function subscriberModeError(operation: string, error: unknown): LockConnectionError | undefined {
  if (!(error instanceof Error) || !error.message.startsWith('Connection in subscriber mode')) return undefined;
  return new LockConnectionError(
    `Redis ${operation} not sent: the client given as the redis option is in subscriber mode (subscribe() was called on it), ` +
      `where Redis takes no other command; every lock call fails until it unsubscribes. Keep subscriptions on a connection of their own, or ${OWN_CLIENT}.`,
    operation,
    { cause: error },
  );
}

/** A Cluster client subscribes on a connection of its own; a single client's `condition.subscriber` is set while it is subscribed. */
function inSubscriberMode(client: RedisClient): boolean {
  if (isClusterClient(client)) return false;
  return Boolean((client as unknown as { condition?: { subscriber?: unknown } }).condition?.subscriber);
}
