import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule } from '@nestjs/core';
import { LockHttpErrorsInterceptor } from './locked/lock-http-errors.interceptor';
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
  providers: [LockService, LockedExplorer, { provide: APP_INTERCEPTOR, useClass: LockHttpErrorsInterceptor }],
  exports: [LockService],
})
export class DistributedLockModule extends DistributedLockConfigurableModule {}
