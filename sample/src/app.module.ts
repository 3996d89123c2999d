import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { ScheduleModule } from '@nestjs/schedule';
import { DistributedLockModule } from '../../lib';
import { CLAIM_QUEUE } from './campaigns/campaign-lock-key';
import { CampaignsModule } from './campaigns/campaigns.module';
import { AppConfig, validateConfig } from './config/app-config';
import { DatabaseModule } from './database/database.module';
import { MetricsModule } from './metrics/metrics.module';
import { HealthModule } from './health/health.module';
import { SettlementModule } from './settlement/settlement.module';

@Module({
  imports: [
    // Configuration comes from the environment only (12-factor); validated before anything starts.
    ConfigModule.forRoot({ isGlobal: true, ignoreEnvFile: true, validate: validateConfig }),
    ScheduleModule.forRoot(),
    DistributedLockModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService<AppConfig, true>) => ({
        redis: config.get('REDIS_URL', { infer: true }),
        keyPrefix: 'coupons:lock:',
        ttl: config.get('LOCK_TTL', { infer: true }),
        onBusy: 'retry',
        waitTimeout: config.get('CLAIM_WAIT_MS', { infer: true }),
        // POST /campaigns/:id/claims/deferred (onBusy 'defer'): busy claims become BullMQ jobs that
        // every instance's worker runs later under the same lock. A claim that meets a lease lost
        // mid-write (409 stale-fence) is retried; sold out and already claimed are results, not failures.
        defer: { queueName: CLAIM_QUEUE, attempts: 3, backoff: 200 },
      }),
    }),
    DatabaseModule,
    CampaignsModule,
    SettlementModule,
    MetricsModule,
    HealthModule,
  ],
})
export class AppModule {}
