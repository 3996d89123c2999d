import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { LOCK_BACKEND } from '../core/lock-backend';
import { DEFER_QUEUE_FACTORY } from '../defer/defer-job-queue';
import { DISTRIBUTED_LOCK_OPTIONS } from '../distributed-lock.module-definition';
import { LockDeferCoordinator } from '../lock-defer.coordinator';
import { LockModuleDrain } from '../lock-module-drain';
import { LOCK_MODULE_EXPORTS, LOCK_MODULE_PROVIDERS } from '../lock-module-providers';
import { assertForRootAsyncOptions, checkOptionsFactory } from '../options/for-root-async-options';
import { assertForRootOptions } from '../options/for-root-options';
import {
  DISTRIBUTED_LOCK_TESTING_FOR_ROOT_ASYNC_OPTIONS,
  DISTRIBUTED_LOCK_TESTING_FOR_ROOT_OPTIONS,
  DistributedLockTestingConfigurableModule,
} from './distributed-lock-testing.module-definition';
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
    // The production coordinator (defer options, startup checks, shutdown order) over an in-process queue.
    { provide: DEFER_QUEUE_FACTORY, useFactory: (testing: LockTestingController) => testing.deferQueues, inject: [LockTestingController] },
    ...LOCK_MODULE_PROVIDERS,
    LockDeferCoordinator,
    LockModuleDrain,
  ],
  exports: [...LOCK_MODULE_EXPORTS, LockTestingController],
})
export class DistributedLockTestingModule extends DistributedLockTestingConfigurableModule {
  static forRoot(options: typeof DISTRIBUTED_LOCK_TESTING_FOR_ROOT_OPTIONS): DynamicModule {
    assertForRootOptions('DistributedLockTestingModule', options);
    return super.forRoot(options);
  }

  static forRootAsync(options: typeof DISTRIBUTED_LOCK_TESTING_FOR_ROOT_ASYNC_OPTIONS): DynamicModule {
    assertForRootAsyncOptions('DistributedLockTestingModule', options);
    return checkOptionsFactory(super.forRootAsync(options), options, 'DistributedLockTestingModule', DISTRIBUTED_LOCK_OPTIONS);
  }
}
