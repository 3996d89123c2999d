import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { DistributedLockConfigurableModule } from './distributed-lock.module-definition';
import { LockDeferCoordinator } from './lock-defer.coordinator';
import { LOCK_MODULE_EXPORTS, LOCK_MODULE_PROVIDERS } from './lock-module-providers';

/**
 * `DistributedLockModule.forRoot({ redis, ... })` or `.forRootAsync({ imports, inject, useFactory })`.
 * Global by default (`isGlobal: false` to scope it). Provides `LockService`; attaches it to the
 * instances with `@Locked` methods and maps lock errors of HTTP handlers to 409/503.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [...LOCK_MODULE_PROVIDERS, LockDeferCoordinator],
  exports: LOCK_MODULE_EXPORTS,
})
export class DistributedLockModule extends DistributedLockConfigurableModule {}
