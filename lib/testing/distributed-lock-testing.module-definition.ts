import { ConfigurableModuleBuilder } from '@nestjs/common';
import { DISTRIBUTED_LOCK_OPTIONS } from '../distributed-lock.module-definition';
import type { DistributedLockTestingModuleOptions } from './distributed-lock-testing-module-options.interface';

/** Same shape as DistributedLockModule's (forRoot / forRootAsync, global by default), and the same options token, read by LockService. */
export const {
  ConfigurableModuleClass: DistributedLockTestingConfigurableModule,
  OPTIONS_TYPE: DISTRIBUTED_LOCK_TESTING_FOR_ROOT_OPTIONS,
  ASYNC_OPTIONS_TYPE: DISTRIBUTED_LOCK_TESTING_FOR_ROOT_ASYNC_OPTIONS,
} = new ConfigurableModuleBuilder<DistributedLockTestingModuleOptions>({
  moduleName: 'DistributedLockTesting',
  optionsInjectionToken: DISTRIBUTED_LOCK_OPTIONS,
})
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
