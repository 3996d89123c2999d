import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { DistributedLockModuleOptions } from './options/distributed-lock-module-options.interface';

export const {
  ConfigurableModuleClass: DistributedLockConfigurableModule,
  MODULE_OPTIONS_TOKEN: DISTRIBUTED_LOCK_OPTIONS,
  OPTIONS_TYPE: DISTRIBUTED_LOCK_FOR_ROOT_OPTIONS,
  ASYNC_OPTIONS_TYPE: DISTRIBUTED_LOCK_FOR_ROOT_ASYNC_OPTIONS,
} = new ConfigurableModuleBuilder<DistributedLockModuleOptions>({ moduleName: 'DistributedLock' })
  .setClassMethodName('forRoot')
  // Global by default: a lock is an application-wide concern and @Locked may sit in any module.
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
