import type Redis from 'ioredis';
import { DistributedLockModule, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { RedisProcess, type SharedRedis } from '../harness/redis-process';
import { BehaviourOptions, describeLockBehaviour, LockWorld } from '../shared/lock-behaviour.suite';

/** The shared behaviour suite on a real redis-server, through DistributedLockModule. */
describeLockBehaviour('Redis', () => {
  let redis: SharedRedis;
  let client: Redis;
  let services: LockService[] = [];
  // A prefix per test: nothing one test leaves behind (a lapsing lease, a queue) reaches the next.
  let test = 0;
  const prefix = () => `behaviour${test}:`;
  const name = (key: string) => lockRedisKeys(prefix(), key);

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    client = redis.client();
  });
  afterAll(() => redis.stop());

  const world: LockWorld = {
    lockModule: (options: BehaviourOptions) => DistributedLockModule.forRoot({ ...options, redis: redis.url, keyPrefix: prefix() }),
    adopt: () => undefined,
    async service(options = {}) {
      const service = new LockService({ ...options, redis: redis.url, keyPrefix: prefix() });
      services.push(service);
      await service.onModuleInit();
      return service;
    },
    async hold(key, ttl) {
      expect(await client.set(name(key).lock, 'elsewhere', 'PX', ttl, 'NX')).toBe('OK');
    },
    async expire(key) {
      await client.del(name(key).lock);
    },
    waiting: (key) => client.llen(name(key).queue),
    async reset() {
      await Promise.all(services.map((s) => s.close()));
      services = [];
      test++;
    },
  };
  return world;
});
