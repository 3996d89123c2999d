import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { LockHealthIndicator } from '../../../lib/terminus';
import { HealthController } from './health.controller';

/** What an application adds for health checks: TerminusModule and the lock's indicator among its providers. */
@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController],
  providers: [LockHealthIndicator],
})
export class HealthModule {}
