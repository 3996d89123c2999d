import { DynamicModule, Module } from '@nestjs/common';
import { describeValue } from './errors/describe-value';
import { LockOptionsError } from './errors/lock-options.error';
import { assertOptionsObject } from './options/validate-options';
import { DiscoveryModule } from '@nestjs/core';
import { DISTRIBUTED_LOCK_FOR_ROOT_OPTIONS, DistributedLockConfigurableModule } from './distributed-lock.module-definition';
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
export class DistributedLockModule extends DistributedLockConfigurableModule {
  /** Checked here, before Nest reads it: Nest itself throws a TypeError for no options, and spreads a string into an object of characters. */
  static forRoot(options: typeof DISTRIBUTED_LOCK_FOR_ROOT_OPTIONS): DynamicModule {
    if (typeof options === 'string') {
      throw new LockOptionsError(
        'DistributedLockModule.forRoot(options)',
        `expected an options object, got ${describeValue(options)}. A URL goes in the redis option: forRoot({ redis: ${JSON.stringify(options)} }).`,
      );
    }
    assertOptionsObject('DistributedLockModule.forRoot(options)', options);
    if (options.isGlobal !== undefined && typeof options.isGlobal !== 'boolean') {
      throw new LockOptionsError('isGlobal', `expected a boolean, got ${describeValue(options.isGlobal)}.`);
    }
    return super.forRoot(options);
  }
}
