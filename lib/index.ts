export { DistributedLockModule } from './distributed-lock.module';
export { DISTRIBUTED_LOCK_OPTIONS } from './distributed-lock.module-definition';
export { LockService } from './lock.service';
export { Lock } from './core/lock';
export { currentLock } from './core/lock-context';
export type { LockStats } from './core/lock-stats';
export * from './errors';
export * from './options';
export { Locked } from './locked/locked.decorator';
export { Deferred } from './defer/deferred';
export { LOCKED_METADATA } from './locked/locked.constants';
export type { LockedMetadata } from './locked/locked.constants';
export type { LockedOnBusyPolicy, LockedOptions } from './locked/locked-options.interface';
export type {
  AdmitsDeferred,
  AdmitsFallback,
  DeferLockedMethodDecorator,
  DeferLockedOptions,
  DeferredNotInReturnType,
  FailFastLockedMethodDecorator,
  FailFastLockedOptions,
  FallbackNotInReturnType,
  LockableMethod,
  LockableResult,
  LockedMethodDecorator,
  PolicyUnknownAtCompileTime,
  WaitingLockedOptions,
} from './locked/locked-decorator.types';
export { LockHttpErrorsInterceptor } from './locked/lock-http-errors.interceptor';
export { LockHttpErrorsFilter } from './locked/lock-http-errors.filter';
export type { LockKeySpec } from './keys/key-source';
export { lockKey } from './keys/lock-key';
