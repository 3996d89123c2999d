import { Injectable } from '@nestjs/common';
import { SqliteDatabase } from '../database/sqlite-database';

@Injectable()
export class SettlementRepository {
  constructor(private readonly database: SqliteDatabase) {}

  /** Marks every unsettled coupon as settled by `tick` and records who ran it; returns how many. */
  async settle(tick: number, instance: string): Promise<number> {
    await this.database.roundTrip();
    const { db } = this.database;
    const run = db.transaction(() => {
      const { changes } = db.prepare('UPDATE coupons SET settled_tick = ? WHERE settled_tick IS NULL').run(tick);
      db.prepare('INSERT INTO settlements (tick, instance, coupons, ran_at) VALUES (?, ?, ?, ?)').run(tick, instance, changes, Date.now());
      return changes;
    });
    return run.immediate();
  }
}
