import Redis, { RedisOptions } from 'ioredis';
import type { RedisConnectionOption } from '../options/distributed-lock-module-options.interface';
import { isClusterClient, isRedisClient, type RedisClient } from '../options/redis-client-shape';

export { isClusterClient, isRedisClient, type RedisClient };

export interface RedisConnection {
  client: RedisClient;
  /** True when the module created the client and therefore must close it (never a user's client). */
  owned: boolean;
}

/**
 * ioredis defaults keep a command pending for many seconds when Redis is down, and replay in-flight
 * commands after a reconnect, which could take a lock for nobody long after the caller was told it
 * failed. Connections we own therefore fail fast and never replay. Every call is bounded by our own
 * timeout (lib/internal/command-deadlines.ts), not ioredis' `commandTimeout`: after a process pause,
 * ioredis' timer would fail a command whose reply is already waiting in the socket.
 */
/** Reconnect delays: 50 ms, doubling, at most 500 ms (the first acquire after Redis is back works within a second). */
const RECONNECT_FIRST_DELAY_MS = 50;
const RECONNECT_MAX_DELAY_MS = 500;

/** How long a connection attempt may take: the command bound, but never below a second (a TLS handshake alone can take that). */
export const connectTimeoutFor = (commandTimeout: number): number => Math.max(commandTimeout, 1_000);

export function connectionDefaults(commandTimeout: number): RedisOptions {
  return {
    connectTimeout: connectTimeoutFor(commandTimeout),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    // Closing a connection whose socket is already dead must not keep the process alive for 2 s.
    disconnectTimeout: 200,
    // Reconnect quickly so the first acquire after Redis comes back works within a second.
    retryStrategy: (attempt: number) => Math.min(RECONNECT_FIRST_DELAY_MS * 2 ** Math.min(attempt, 4), RECONNECT_MAX_DELAY_MS),
  };
}

/**
 * For a primary found through Sentinels: follow a failover as soon as the Sentinels announce it
 * (ioredis' `failoverDetector`, off by default, subscribes to their +switch-master). Without it a
 * connection made before a planned failover (SENTINEL FAILOVER) stays on the old primary, which keeps
 * taking writes as a master for seconds after the replica was promoted: a service connected before
 * would grant a key there that a service connected after is granted on the new primary. An explicit
 * `failoverDetector` in your options wins.
 */
export function sentinelDefaults(option: object): RedisOptions {
  return 'sentinels' in option && option.sentinels !== undefined ? { failoverDetector: true } : {};
}

/**
 * The module's own connection, made when the LockService is built but opened only at startup (the
 * backend's `ready()`) or by the first call: a module compiled and never initialised (Nest's generated
 * spec: `compile()`, no `init()` or `close()`) must not keep reconnecting and hold the process open.
 */
export function createRedisConnection(option: RedisConnectionOption, commandTimeout: number): RedisConnection {
  if (isRedisClient(option)) return { client: option, owned: false };
  const defaults: RedisOptions = { ...connectionDefaults(commandTimeout), lazyConnect: true };
  const client = typeof option === 'string' ? new Redis(option, defaults) : new Redis({ ...defaults, ...sentinelDefaults(option), ...option });
  reopenWhenEnded(client);
  return { client, owned: true };
}

/** Resolves once the client can take commands, or after `timeoutMs` (callers then fail per call). */
export function waitUntilReady(client: RedisClient, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    timer.unref();
    client.on('ready', onReady);
  });
}

/** Connections of ours closed on purpose (closeConnection, closeNow): never opened again. */
const closedOnPurpose = new WeakSet<object>();

/**
 * Opens a connection of ours again when ioredis gives it up for good (status 'end') without our asking:
 * it does so when one connect attempt fails in a way it does not retry. With `failoverDetector` (Sentinel),
 * a `+switch-master` that arrives while the client is already reconnecting after a crashed primary closes
 * that attempt ("Connection is closed") and ends the client: every lock call would then fail until a
 * restart. Reopened after the longest reconnect delay; calls meanwhile fail fast, saying it is being
 * re-established (ConnectionState).
 */
export function reopenWhenEnded(client: RedisClient): void {
  client.on('end', () => {
    if (closedOnPurpose.has(client)) return;
    const timer = setTimeout(() => {
      if (!closedOnPurpose.has(client) && client.status === 'end') client.connect().catch(() => undefined);
    }, RECONNECT_MAX_DELAY_MS);
    timer.unref();
  });
}

/** Whether a connection of ours was closed on purpose (an ended one that was not is being opened again). */
export const closedOnPurposeBy = (client: RedisClient): boolean => closedOnPurpose.has(client);

/**
 * The socket a client's calls go out on now: another one after every reconnect, so it tells one connection from the
 * next (a fresh script cache, a connection to check again, a reply on it to an older call being a replay).
 */
export const socketOf = (client: RedisClient): unknown => (client as { stream?: unknown }).stream;

/** Closes a connection of ours at once (no QUIT), for good. */
export function closeNow(client: RedisClient): void {
  closedOnPurpose.add(client);
  client.disconnect();
}

/** Closes a connection we own: QUIT for a clean goodbye, then a hard disconnect; resolves once it ended, bounded. */
export async function closeConnection(client: RedisClient, timeoutMs: number): Promise<void> {
  closedOnPurpose.add(client);
  if (client.status === 'end') return;
  let timer: NodeJS.Timeout | undefined;
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
  if (client.status === 'ready') {
    await Promise.race([client.quit().catch(() => undefined), bound]);
  }
  // A client between reconnect attempts has no socket left to close and never emits 'end'.
  const hasSocket = client.status !== 'reconnecting' && client.status !== 'wait' && client.status !== 'close';
  client.disconnect();
  if (hasSocket) await Promise.race([ended, bound]);
  clearTimeout(timer);
}
