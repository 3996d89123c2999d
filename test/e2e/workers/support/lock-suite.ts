/**
 * The lifecycle of an end-to-end lock suite, registered once: its own Redis and a plain client to look
 * into it, services made through `makeService` (closed after each test), extra clients (disconnected
 * after each test), worker processes (stopped at the end), every tracked call settled after each
 * test, and no process left behind.
 */
import type Redis from 'ioredis';
import { DistributedLockModuleOptions, LockService } from '../../../../lib';
import { RedisProcess, killSurvivors } from '../../../harness/redis-process';
import type { WorkerHandle } from '../../../harness/worker-process';
import { SettleTracker } from './settle-tracker';

export interface LockSuite {
  redis: RedisProcess;
  client: Redis;
  readonly calls: SettleTracker;
  readonly workers: WorkerHandle[];
  /** Clients a test made itself; disconnected after it. */
  readonly clients: Redis[];
  /** A started LockService on the suite's Redis with the suite's defaults, closed after the test. */
  makeService(options?: Partial<DistributedLockModuleOptions>): Promise<LockService>;
}

export function lockSuite(defaults: Partial<DistributedLockModuleOptions>): LockSuite {
  const services: LockService[] = [];
  const suite: LockSuite = {
    redis: undefined as unknown as RedisProcess,
    client: undefined as unknown as Redis,
    calls: new SettleTracker(),
    workers: [],
    clients: [],
    async makeService(options = {}) {
      const service = new LockService({ redis: suite.redis.url, ...defaults, ...options });
      services.push(service);
      await service.onModuleInit();
      return service;
    },
  };
  beforeAll(async () => {
    suite.redis = await RedisProcess.start();
    suite.client = suite.redis.client();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    suite.clients.splice(0).forEach((c) => c.disconnect());
    expect(suite.calls.pending()).toEqual([]);
  });
  afterAll(async () => {
    await Promise.all(suite.workers.map((w) => w.stop()));
    suite.client.disconnect();
    await suite.redis.stop();
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));
  return suite;
}
