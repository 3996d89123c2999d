import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import {
  DISTRIBUTED_LOCK_FOR_ROOT_ASYNC_OPTIONS,
  DISTRIBUTED_LOCK_FOR_ROOT_OPTIONS,
  DISTRIBUTED_LOCK_OPTIONS,
  DistributedLockConfigurableModule,
} from './distributed-lock.module-definition';
import { LockDeferCoordinator } from './lock-defer.coordinator';
import { LockModuleDrain } from './lock-module-drain';
import { LOCK_MODULE_EXPORTS, LOCK_MODULE_PROVIDERS } from './lock-module-providers';
import { assertForRootAsyncOptions, checkOptionsFactory } from './options/for-root-async-options';
import { assertForRootOptions } from './options/for-root-options';

/**
 * `DistributedLockModule.forRoot({ redis, ... })` or `.forRootAsync({ imports, inject, useFactory })`.
 * Global by default (`isGlobal: false` to scope it). Provides `LockService`; attaches it to the
 * instances with `@Locked` methods and maps lock errors of HTTP handlers to 409/503.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [...LOCK_MODULE_PROVIDERS, LockDeferCoordinator, LockModuleDrain],
  exports: LOCK_MODULE_EXPORTS,
})
export class DistributedLockModule extends DistributedLockConfigurableModule {
  static forRoot(options: typeof DISTRIBUTED_LOCK_FOR_ROOT_OPTIONS): DynamicModule {
    assertForRootOptions('DistributedLockModule', options);
    return super.forRoot(options);
  }

  static forRootAsync(options: typeof DISTRIBUTED_LOCK_FOR_ROOT_ASYNC_OPTIONS): DynamicModule {
    assertForRootAsyncOptions('DistributedLockModule', options);
    return checkOptionsFactory(super.forRootAsync(options), options, 'DistributedLockModule', DISTRIBUTED_LOCK_OPTIONS);
  }
}
