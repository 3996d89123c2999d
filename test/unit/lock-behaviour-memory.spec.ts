import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';
import { describeLockBehaviour, LockWorld } from '../shared/lock-behaviour.suite';

/** The shared behaviour suite in memory, through DistributedLockTestingModule: no Redis at all. */
describeLockBehaviour('in memory (testing module)', () => {
  let testing = new LockTestingController();
  let services: LockService[] = [];
  const world: LockWorld = {
    lockModule: (options) => DistributedLockTestingModule.forRoot(options),
    adopt(app: INestApplicationContext) {
      testing = app.get(LockTestingController);
    },
    service(options) {
      const service = testing.createService(options);
      services.push(service);
      return Promise.resolve(service);
    },
    hold(key, ttl) {
      testing.hold(key, { ttl });
      return Promise.resolve();
    },
    expire(key) {
      testing.expire(key);
      return Promise.resolve();
    },
    waiting: (key) => Promise.resolve(testing.waiting(key)),
    async reset() {
      await Promise.all(services.map((s) => s.close()));
      services = [];
      testing = new LockTestingController();
    },
  };
  return world;
});
