import { Injectable, Logger } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Cron, CronExpression } from '@nestjs/schedule';
import type { AppConfig } from '../config/app-config';
import { SwitchableLocked } from '../locking/switchable-locked.decorator';
import { SettlementRepository } from './settlement.repository';

/**
 * How long the job keeps the lock, however fast the work was (`minHold`). Every instance's cron
 * fires "at" the same second, but a busy event loop fires it late; without this, an instance firing
 * 30 ms late would find the lock already released and run the same tick again. Must stay below the
 * cron period (the demo runs it every second).
 */
const HOLD_TICK_LOCK_MS = 800;

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
  @SwitchableLocked('jobs:settle', { onBusy: 'fail-fast', minHold: HOLD_TICK_LOCK_MS })
  async settle(): Promise<void> {
    const tick = Math.floor(Date.now() / 1000);
    const settled = await this.settlements.settle(tick, this.instance);
    if (settled > 0) this.logger.debug(`settled ${settled} coupon(s)`);
  }
}
