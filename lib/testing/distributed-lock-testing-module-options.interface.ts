import type { DistributedLockModuleOptions } from '../options/distributed-lock-module-options.interface';

/**
 * The options of `DistributedLockModule`, with `redis` optional and ignored (but, like `nodes`, refused
 * when production would refuse it): the same object works in both. `keyPrefix` and `commandTimeout` have nothing to act on; `replicaAcks` has no replicas to wait for.
 */
export type DistributedLockTestingModuleOptions = Omit<DistributedLockModuleOptions, 'redis'> & {
  redis?: DistributedLockModuleOptions['redis'];
};
