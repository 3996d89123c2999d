import type Redis from 'ioredis';
import { LockService } from '../../lib';
import type { DistributedLockModuleOptions } from '../../lib';
import { commandStats } from '../harness/command-stats';
import { RedisProcess, type SharedRedis } from '../harness/redis-process';

/** Services made by a suite, closed in afterEach so no watchdog, timer or connection survives a test. */
export class ServicePool {
  private readonly services: LockService[] = [];

  constructor(private readonly url: () => string) {}

  async make(options: Partial<DistributedLockModuleOptions> = {}): Promise<LockService> {
    const service = new LockService({ redis: this.url(), keyPrefix: 'test:', ...options });
    this.services.push(service);
    await service.onModuleInit();
    return service;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.services.splice(0).map((s) => s.close()));
  }
}

/** Calls of one Redis command, from INFO commandstats (counts commands run inside scripts separately). */
export async function commandCalls(client: Redis, command: string): Promise<number> {
  return (await commandStats(client))[command] ?? 0;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passed; returns whether it did. */
export async function pollUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 5): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() >= deadline) return false;
    await sleep(everyMs);
  }
}

/** A suite's Redis (shared, or its own when REDIS_URL is unset), a plain client, and the services its tests make. */
export interface RedisSuite {
  redis: SharedRedis;
  client: Redis;
  pool: ServicePool;
}

/**
 * The lifecycle most suites share, registered once: a Redis for the suite and a plain client to look
 * into it, every service a test made closed after it, Redis stopped (or left to its owner) at the end.
 */
export function redisSuite(): RedisSuite {
  const suite = {} as RedisSuite;
  suite.pool = new ServicePool(() => suite.redis.url);
  beforeAll(async () => {
    suite.redis = await RedisProcess.shared();
    suite.client = suite.redis.client();
  });
  afterEach(() => suite.pool.closeAll());
  afterAll(() => suite.redis.stop());
  return suite;
}
