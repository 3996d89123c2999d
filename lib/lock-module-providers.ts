import type { Provider } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { LockService } from './lock.service';
import { LockHttpErrorsInterceptor } from './locked/lock-http-errors.interceptor';
import { LOCKED_LOCK_SERVICE } from './locked/lock-service-injection';
import { LockedExplorer } from './locked/locked.explorer';
import { SingleGlobalLockModule } from './single-global-lock-module';

/**
 * What every lock module provides, whatever its backend (DistributedLockModule on Redis, the testing
 * module in memory): the check that the application has one global lock module, the LockService, its alias for
 * `@Locked` instances of any scope (locked/lock-service-injection.ts), the explorer, and the HTTP error mapping.
 */
export const LOCK_MODULE_PROVIDERS: Provider[] = [
  SingleGlobalLockModule,
  LockService,
  { provide: LOCKED_LOCK_SERVICE, useExisting: LockService },
  LockedExplorer,
  { provide: APP_INTERCEPTOR, useClass: LockHttpErrorsInterceptor },
];

/** What every lock module exports. */
export const LOCK_MODULE_EXPORTS = [LockService, LOCKED_LOCK_SERVICE];
