export { DistributedLockTestingModule } from './distributed-lock-testing.module';
export type { DistributedLockTestingModuleOptions } from './distributed-lock-testing-module-options.interface';
export { LockTestingController } from './lock-testing.controller';
export type { HeldElsewhere } from './lock-testing.controller';
export type { DeferredJobSnapshot, DeferredJobState } from './deferred-job-snapshot';
