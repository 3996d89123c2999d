export { DistributedLockModule } from './distributed-lock.module';
export { DISTRIBUTED_LOCK_OPTIONS } from './distributed-lock.module-definition';
export { LockService } from './lock.service';
export { Lock } from './lock';
export { currentLock } from './lock-context';
export type { LockStats } from './lock-runtime';
export * from './errors';
export * from './interfaces';
