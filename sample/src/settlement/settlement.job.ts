import { Injectable, Logger } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Cron, CronExpression } from '@nestjs/schedule';
import { setTimeout as sleep } from 'timers/promises';
import type { AppConfig } from '../config/app-config';
import { SwitchableLocked } from '../locking/switchable-locked.decorator';
import { SettlementRepository } from './settlement.repository';

/**
 * How long into its tick the job keeps the lock, however fast the work was. Every instance's cron
 * fires "at" the same second, but a busy event loop fires it late; without this, an instance firing
 * 30 ms late would find the lock already released and run the same tick again (ShedLock calls this
 * `lockAtLeastFor`). Must stay below the cron period.
 */
const HOLD_INTO_TICK_MS = 800;

/** Read at class definition, like every @Cron expression; the demo sets '* * * * * *' (every second). */
const SETTLE_CRON = process.env.SETTLE_CRON || CronExpression.EVERY_10_SECONDS;

@Injectable()
export class SettlementJob {
  private readonly logger = new Logger(SettlementJob.name);
  private readonly instance: string;

  constructor(
    private readonly settlements: SettlementRepository,
    config: ConfigService<AppConfig, true>,
  ) {
    this.instance = config.get('INSTANCE', { infer: true });
  }

  /** Runs on exactly one instance per tick; the others find the lock taken and skip the tick quietly. */
  @Cron(SETTLE_CRON, { name: 'settle-coupons' })
  @SwitchableLocked('jobs:settle', { onBusy: 'fail-fast' })
  async settle(): Promise<void> {
    const tickStartedAt = Math.floor(Date.now() / 1000) * 1000;
    const settled = await this.settlements.settle(tickStartedAt / 1000, this.instance);
    if (settled > 0) this.logger.debug(`settled ${settled} coupon(s)`);
    const holdFor = tickStartedAt + HOLD_INTO_TICK_MS - Date.now();
    if (holdFor > 0) await sleep(holdFor);
  }
}
