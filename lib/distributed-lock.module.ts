import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule } from '@nestjs/core';
import { LockHttpErrorsInterceptor } from './locked/lock-http-errors.interceptor';
import { LOCKED_LOCK_SERVICE } from './locked/lock-service-injection';
import { LockedExplorer } from './locked/locked.explorer';
import { DistributedLockConfigurableModule } from './distributed-lock.module-definition';
import { LockService } from './lock.service';

/**
 * `DistributedLockModule.forRoot({ redis, ... })` or `.forRootAsync({ imports, inject, useFactory })`.
 * Global by default (`isGlobal: false` to scope it). Provides `LockService`; attaches it to the
 * instances with `@Locked` methods and maps lock errors of HTTP handlers to 409/503.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    LockService,
    // What Nest injects into instances with @Locked methods (any scope): see locked/lock-service-injection.ts.
    { provide: LOCKED_LOCK_SERVICE, useExisting: LockService },
    LockedExplorer,
    { provide: APP_INTERCEPTOR, useClass: LockHttpErrorsInterceptor },
  ],
  exports: [LockService, LOCKED_LOCK_SERVICE],
})
export class DistributedLockModule extends DistributedLockConfigurableModule {}
