import { describeValue } from '../errors/describe-value';
import { LockOptionsError } from '../errors/lock-options.error';
import type { DistributedLockModuleOptions } from './distributed-lock-module-options.interface';
import { IOREDIS_OPTION_KEYS, SENTINEL_ADDRESS_KEYS } from './ioredis-option-keys';
import { assertNoMisplacedConnectionKeys } from './misplaced-connection-keys';
import { assertNoNearMissKeys } from './near-miss-keys';
import { isClusterClient, isRedisClient } from './redis-client-shape';
import type { ResolvedModuleOptions } from './resolve-options';

/**
 * Checks what a `redis` option (or one Redlock node) names before any connection is made: a redis:// or
 * rediss:// URL (or a Unix socket path), a Redis client, or ioredis options that name a server. ioredis
 * itself connects to localhost:6379 when given a number, `true`, an array or `{}`: every instance would then
 * lock in whatever Redis runs on its own host, and the instances would not exclude each other.
 */
export function assertConnectionOption(where: string, option: unknown): void {
  if (typeof option === 'string') return void parseRedisUrl(where, option);
  if (isRedisClient(option)) return assertPrimaryRole(where, (option as { options?: { role?: unknown; sentinels?: unknown } }).options);
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    throw new LockOptionsError(where, `expected a redis:// URL, ioredis options or a Redis client, got ${describeValue(option)}.`);
  }
  // First: a misspelt host or port would otherwise be reported as missing, or go unnoticed beside the other one.
  assertNoMisplacedConnectionKeys(where, option);
  assertNoNearMissKeys(where, option, IOREDIS_OPTION_KEYS, 'an ioredis option', SERVER_DEFAULTS);
  const o = option as { host?: unknown; port?: unknown; path?: unknown; sentinels?: unknown; name?: unknown };
  if (o.sentinels !== undefined) {
    assertSentinels(where, o.sentinels, o.name);
    return assertPrimaryRole(where, o);
  }
  if (o.host === undefined && o.port === undefined && o.path === undefined) {
    throw new LockOptionsError(
      where,
      'names no server (no host, port, path or sentinels): ioredis would connect to localhost:6379 on every instance. ' +
        "Give the shared server's host and port, or a URL.",
    );
  }
  if (o.path !== undefined) return;
  assertHostAndPort(where, o.host, o.port);
  if (o.host === undefined) {
    throw new LockOptionsError(
      where,
      `names only a port (${String(o.port)}): ioredis would connect to localhost on every instance. Give the shared server's host too.`,
    );
  }
}

/**
 * Sentinel options (or a client made from them) with `role: 'slave'` connect to one of the primary's replicas, which
 * refuses every write: startup passed, and every lock call failed with READONLY, told as a server to check.
 */
function assertPrimaryRole(where: string, options: { role?: unknown; sentinels?: unknown } | undefined): void {
  if (options?.sentinels === undefined || options.sentinels === null || options.role !== 'slave') return;
  throw new LockOptionsError(
    `${where}.role`,
    "is 'slave': ioredis then connects to one of the primary's replicas, which refuses every write, and every lock is a write. " +
      "Leave role out (ioredis' default, 'master'): the Sentinels name the primary and ioredis follows it across failovers.",
  );
}

/** What a left-out host or port means to ioredis, where a slip in its name would leave it out (assertNoNearMissKeys). */
const SERVER_DEFAULTS = {
  host: 'localhost: each instance would lock in a Redis on its own host, and the instances would not exclude each other',
  port: '6379: maybe another Redis than the one every instance shares, and then they would not exclude each other',
};
const SENTINEL_DEFAULTS = { host: 'localhost', port: '26379' };

/**
 * A host and port as given in ioredis options (a Redis server's or a Sentinel's). An empty host is read as localhost,
 * and a port that is not one (NaN from a missing setting, a float, out of range) fails only when connecting: every
 * lock call then waited out its commandTimeout, and startup its startupTimeout, to report "not reachable".
 */
function assertHostAndPort(where: string, host: unknown, port: unknown): void {
  if (host !== undefined && (typeof host !== 'string' || host.length === 0)) {
    throw new LockOptionsError(
      `${where}.host`,
      `expected the server's host name or address (a non-empty string), got ${describeValue(host)}; ioredis would connect to localhost.`,
    );
  }
  if (port === undefined) return;
  const number = typeof port === 'string' && /^\d+$/.test(port) ? Number(port) : port;
  if (typeof number !== 'number' || !Number.isInteger(number) || number < 1 || number > 65_535) {
    throw new LockOptionsError(`${where}.port`, `expected a TCP port, an integer from 1 to 65535, got ${describeValue(port)}.`);
  }
}

/**
 * The server a URL string names, read as ioredis reads it: digits alone are a port (on localhost:
 * refused, as `{}` is), '/path' a Unix socket (returned as is), '//host:port' and 'host:port' (no
 * scheme) a redis:// URL. Throws LockOptionsError for anything ioredis would not read as a server.
 */
export function parseRedisUrl(where: string, url: string): URL | string {
  if (/^\d+$/.test(url)) {
    throw new LockOptionsError(
      where,
      `names only a port (${url}): ioredis would connect to localhost on every instance. Give the shared server's host too.`,
    );
  }
  if (url.startsWith('/') && !url.startsWith('//')) return url;
  const withScheme = url.startsWith('//') ? `redis:${url}` : url.includes('://') ? url : `redis://${url}`;
  let parsed: URL;
  try {
    parsed = new URL(withScheme);
  } catch {
    throw new LockOptionsError(where, `expected a redis:// or rediss:// URL, got ${describeValue(url)}.`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new LockOptionsError(
      where,
      `expected a redis:// or rediss:// URL (rediss for TLS), got the scheme "${parsed.protocol}" in ${describeValue(url)}.`,
    );
  }
  if (parsed.port === '0') throw new LockOptionsError(where, `expected a TCP port from 1 to 65535 in ${describeValue(url)}, got 0.`);
  return parsed;
}

function assertSentinels(where: string, sentinels: unknown, name: unknown): void {
  if (Array.isArray(sentinels)) {
    sentinels.forEach((s: unknown, i) => {
      if (typeof s === 'object' && s !== null) {
        assertNoNearMissKeys(`${where}.sentinels[${i}]`, s, SENTINEL_ADDRESS_KEYS, 'a key ioredis reads from a Sentinel address', SENTINEL_DEFAULTS);
        const { host, port } = s as { host?: unknown; port?: unknown };
        assertHostAndPort(`${where}.sentinels[${i}]`, host, port);
      }
    });
  }
  const valid =
    Array.isArray(sentinels) &&
    sentinels.length > 0 &&
    sentinels.every(
      (s) => typeof s === 'object' && s !== null && ((s as { host?: unknown }).host !== undefined || (s as { port?: unknown }).port !== undefined),
    );
  if (!valid) {
    throw new LockOptionsError(
      `${where}.sentinels`,
      `expected a non-empty array of { host, port } (the Sentinels to ask for the primary), got ${describeValue(sentinels)}.`,
    );
  }
  if (typeof name !== 'string' || name.length === 0) {
    throw new LockOptionsError(
      `${where}.name`,
      `expected the name of the primary the Sentinels monitor (a non-empty string), got ${describeValue(name)}.`,
    );
  }
}

/**
 * The `redis` option as a single-Redis backend reads it. WAIT confirms the writes of one connection to
 * one primary's replicas: a Cluster client spreads locks over several primaries (not supported).
 * `'optional'`: where it is ignored (the testing module), it may be left out, but what is given must
 * be what production would take.
 */
export function assertRedisOption(
  options: DistributedLockModuleOptions,
  settings: Pick<ResolvedModuleOptions, 'replicaAcks'>,
  presence: 'required' | 'optional',
): void {
  if (options.redis === undefined && presence === 'optional') return;
  if (options.redis === undefined || options.redis === null || options.redis === '') {
    throw new LockOptionsError(
      'redis',
      "missing: pass a URL ('redis://127.0.0.1:6379'), ioredis options, or a Redis/Cluster instance; or 'nodes' for Redlock over independent masters.",
    );
  }
  assertConnectionOption('redis', options.redis);
  if (settings.replicaAcks > 0 && isClusterClient(options.redis)) {
    throw new LockOptionsError(
      'replicaAcks',
      'is not supported with a Redis Cluster client; use a single primary with replicas (e.g. under Sentinel), or leave it 0.',
    );
  }
}
