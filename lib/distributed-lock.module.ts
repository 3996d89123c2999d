import { Module } from '@nestjs/common';
import { DistributedLockConfigurableModule } from './distributed-lock.module-definition';
import { LockService } from './lock.service';

/**
 * `DistributedLockModule.forRoot({ redis, ... })` or `.forRootAsync({ imports, inject, useFactory })`.
 * Global by default (`isGlobal: false` to scope it). Provides `LockService`.
 */
@Module({
  providers: [LockService],
  exports: [LockService],
})
export class DistributedLockModule extends DistributedLockConfigurableModule {}
