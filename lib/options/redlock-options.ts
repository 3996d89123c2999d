import { LockOptionsError } from '../errors/lock-options.error';
import { describeValue } from '../errors/describe-value';
import { assertConnectionOption, parseRedisUrl } from './connection-option';
import type { DistributedLockModuleOptions, RedisConnectionOption } from './distributed-lock-module-options.interface';
import { isClusterClient, isRedisClient } from './redis-client-shape';
import type { ResolvedModuleOptions } from './resolve-options';
import { assertIntegerMs, given } from './validate-options';

/** What the Redlock backend reads beyond the common settings. */
export interface RedlockSettings {
  nodes: readonly RedisConnectionOption[];
  /** Every per-node call is bounded by this (ms). */
  nodeTimeout: number;
  nodeRecoveryDelay: number;
}

/** Most nodes accepted: more than any sensible Redlock set (each acquire talks to all of them). */
const MAX_NODES = 15;
/** Each node gets at most this share of the default lease per call, so a slow node costs little of it. */
const NODE_TIMEOUT_SHARE_OF_TTL = 10;

/**
 * Per-node bound: min(commandTimeout, ttl / 10). A node that answers later than a tenth of the lease
 * is not waited for: its vote is lost, but the lease the others granted is still almost whole. Every
 * operation runs on all nodes in parallel, so an operation is bounded by it (an acquire by twice: the
 * attempt, then the fencing write-back).
 */
export const redlockNodeTimeout = (commandTimeout: number, ttl: number): number =>
  Math.max(1, Math.min(commandTimeout, Math.floor(ttl / NODE_TIMEOUT_SHARE_OF_TTL)));

/** Validates the Redlock options (`nodes` given); throws `LockOptionsError` saying what to do. */
export function resolveRedlockSettings(options: DistributedLockModuleOptions, settings: ResolvedModuleOptions): RedlockSettings {
  const nodes = options.nodes as unknown;
  if (options.redis !== undefined) {
    throw new LockOptionsError(
      'nodes',
      "cannot be given together with 'redis': pass 'redis' for one Redis (or Sentinel/Cluster), or 'nodes' for Redlock over independent masters, not both.",
    );
  }
  if (!Array.isArray(nodes)) {
    throw new LockOptionsError(
      'nodes',
      `expected an array of 3, 5 or 7… independent Redis masters (URLs, ioredis options or clients), got ${describeValue(nodes)}.`,
    );
  }
  if (nodes.length < 3 || nodes.length % 2 === 0 || nodes.length > MAX_NODES) {
    throw new LockOptionsError(
      'nodes',
      `expected an odd number of independent Redis masters from 3 to ${MAX_NODES}, got ${nodes.length}. ` +
        (nodes.length < 3
          ? 'Fewer than 3 cannot survive the loss of any node; with one Redis, use the redis option instead.'
          : 'An even number tolerates no more failures than one node fewer and costs a round trip to one more: add or remove one.'),
    );
  }
  const seen = new Map<string, number>();
  nodes.forEach((node: unknown, i: number) => {
    if (isClusterClient(node)) {
      throw new LockOptionsError(
        `nodes[${i}]`,
        'is a Redis Cluster client. Redlock needs independent masters, each with its own copy of every lock; a Cluster shards keys over its masters, ' +
          "so its nodes are not independent. Pass the Cluster as 'redis' instead, or separate standalone servers as 'nodes'.",
      );
    }
    // URLs as ioredis reads them (host:port without a scheme too), options that name a server, complete Sentinel options.
    if (!isRedisClient(node)) assertConnectionOption(`nodes[${i}]`, node);
    const address = addressOf(`nodes[${i}]`, node);
    if (address === undefined) {
      throw new LockOptionsError(`nodes[${i}]`, `expected a redis:// URL, ioredis options or a Redis client, got ${describeValue(node)}.`);
    }
    const earlier = seen.get(address);
    if (earlier !== undefined) {
      throw new LockOptionsError(
        `nodes[${i}]`,
        `points to ${address}, like nodes[${earlier}]: one server counted twice is a majority of one. Each entry must be a different, independent Redis master.`,
      );
    }
    seen.set(address, i);
  });
  if (settings.replicaAcks > 0) {
    throw new LockOptionsError('replicaAcks', 'is not supported with nodes (Redlock): each node is a standalone master; leave replicaAcks 0.');
  }
  if (options.defer !== undefined) {
    throw new LockOptionsError('defer', "needs one Redis for its job queue and is not supported with nodes (Redlock) yet; use the 'redis' option.");
  }
  const { ttl, minHold } = settings.defaults;
  // The longest lease the defaults make: a release before minHold keeps the key that long.
  const longest = Math.max(ttl, minHold);
  const nodeRecoveryDelay = assertIntegerMs('nodeRecoveryDelay', given(options.nodeRecoveryDelay, longest), 0);
  if (nodeRecoveryDelay > 0 && nodeRecoveryDelay < longest) {
    throw new LockOptionsError(
      'nodeRecoveryDelay',
      `must be at least the ${longest === ttl ? 'ttl' : 'minHold'} (${longest} ms), got ${nodeRecoveryDelay}: a node restarted without its data must not vote while a lease it forgot may still run. ` +
        '0 turns the protection off (only with appendonly yes and appendfsync always on every node).',
    );
  }
  return { nodes, nodeTimeout: redlockNodeTimeout(settings.commandTimeout, ttl), nodeRecoveryDelay };
}

/** `host:port` of a node entry (localhost written 127.0.0.1), or undefined when it is none of the accepted forms. */
function addressOf(where: string, node: unknown): string | undefined {
  if (typeof node === 'string') {
    const url = parseRedisUrl(where, node);
    return typeof url === 'string' ? url : normalize(url.hostname, url.port ? Number(url.port) : 6379);
  }
  if (isRedisClient(node)) {
    const o = (node as { options?: { host?: string; port?: number; path?: string } }).options ?? {};
    return o.path ?? normalize(o.host, o.port);
  }
  if (typeof node === 'object' && node !== null) {
    const o = node as { host?: string; port?: number; path?: string; sentinels?: Array<{ host?: string; port?: number }>; name?: string };
    // A primary found through Sentinels is named by the Sentinels asked and the name they monitor it under.
    if (o.sentinels)
      return `${o.name} via Sentinels ${o.sentinels
        .map((s) => normalize(s.host, s.port ?? 26379))
        .sort()
        .join(', ')}`;
    return o.path ?? normalize(o.host, o.port);
  }
  return undefined;
}

function normalize(host: string | undefined, port: number | undefined): string {
  let h = (host ?? 'localhost').toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') h = '127.0.0.1';
  return `${h}:${port ?? 6379}`;
}

/**
 * In Redlock mode a node restarted without its data votes again after nodeRecoveryDelay, which is safe only if
 * every lease is at most that long: a longer ttl (acquire, extend) or minHold is refused before anything is sent.
 * The testing module applies it too, so a test passes only with leases production takes.
 */
export function assertWithinRecoveryDelay(option: string, ttl: number, nodeRecoveryDelay: number): void {
  if (nodeRecoveryDelay > 0 && ttl > nodeRecoveryDelay) {
    throw new LockOptionsError(
      option,
      `${ttl} ms is longer than nodeRecoveryDelay (${nodeRecoveryDelay} ms): in Redlock mode a node restarted without its data votes again ` +
        `after nodeRecoveryDelay, which is safe only if every lease is at most that long. Raise nodeRecoveryDelay or lower the ${option === 'minHold' ? 'minHold' : 'ttl'}.`,
    );
  }
}
