import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { withFreshServer } from './bench-server';
import { ignoreClient } from './round-trips';
import { startServerDelta } from './redis-server-stats';

/**
 * Redis CPU with nothing to do but its housekeeping (serverCron, client timeouts), holding as many
 * connections as workload (c) does. Every "Redis CPU per acquisition" figure contains this share.
 */
export async function idleRedisCpuUsPerSec(connections = 32, subscribed = 16, ms = 2_000): Promise<number> {
  return withFreshServer(async ({ url, admin }) => {
    const clients = Array.from({ length: connections }, () => new Redis(url));
    try {
      clients.forEach(ignoreClient);
      await Promise.all(clients.map((c) => c.ping()));
      await Promise.all(clients.slice(0, subscribed).map((c, i) => c.subscribe(`idle:${i}`)));
      const delta = await startServerDelta(admin);
      await sleep(ms);
      return ((await delta()).cpuUs * 1000) / ms;
    } finally {
      clients.forEach((c) => c.disconnect());
    }
  });
}
