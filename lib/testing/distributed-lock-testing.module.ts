import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule } from '@nestjs/core';
import { LOCK_BACKEND } from '../core/lock-backend';
import { LockService } from '../lock.service';
import { LockHttpErrorsInterceptor } from '../locked/lock-http-errors.interceptor';
import { LockedExplorer } from '../locked/locked.explorer';
import { DistributedLockTestingConfigurableModule } from './distributed-lock-testing.module-definition';
import { LockTestingController } from './lock-testing.controller';

/**
 * Drop-in for `DistributedLockModule` in tests: the same `LockService`, `@Locked` and HTTP error
 * mapping, on an in-memory store with the same semantics, so no Redis is needed. Also provides
 * `LockTestingController` to make keys busy or locks lost.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    LockTestingController,
    { provide: LOCK_BACKEND, useFactory: (testing: LockTestingController) => testing.backend, inject: [LockTestingController] },
    LockService,
    LockedExplorer,
    { provide: APP_INTERCEPTOR, useClass: LockHttpErrorsInterceptor },
  ],
  exports: [LockService, LockTestingController],
})
export class DistributedLockTestingModule extends DistributedLockTestingConfigurableModule {}
