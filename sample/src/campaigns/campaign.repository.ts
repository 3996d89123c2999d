import { Injectable } from '@nestjs/common';
import { randomBytes } from 'crypto';
import type { Statement } from 'better-sqlite3';
import { SqliteDatabase } from '../database/sqlite-database';
import type { Campaign, Coupon, FencedWrite } from './campaign.entities';

interface CampaignRow {
  id: string;
  stock: number;
  issued: number;
  last_fence: number;
}

interface CouponRow {
  id: number;
  campaign_id: string;
  user_id: string;
  code: string;
  instance: string;
  fence: number | null;
  issued_at: number;
}

const toCampaign = (r: CampaignRow): Campaign => ({ id: r.id, stock: r.stock, issued: r.issued, lastFence: r.last_fence });
const toCoupon = (r: CouponRow): Coupon => ({
  id: r.id,
  campaignId: r.campaign_id,
  userId: r.user_id,
  code: r.code,
  instance: r.instance,
  fence: r.fence,
  issuedAt: r.issued_at,
});

/**
 * Data access for campaigns and coupons, shaped like ORM code: load an entity, decide in the
 * service, save it back. Each call awaits a round trip, so the steps of a claim are separate.
 */
@Injectable()
export class CampaignRepository {
  private readonly selectCampaign: Statement<[string], CampaignRow>;
  private readonly selectCouponOf: Statement<[string, string], CouponRow>;
  private readonly countCoupons: Statement<[string], { n: number }>;
  private readonly saveIssuedFenced: Statement<{ id: string; issued: number; fence: number }>;
  private readonly saveIssuedUnfenced: Statement<{ id: string; issued: number }>;
  private readonly insertCoupon: Statement<Omit<CouponRow, 'id'>>;
  private readonly insertRejection: Statement<{ campaign_id: string; instance: string; fence: number; at: number }>;
  private readonly upsertFenced: Statement<{ id: string; stock: number; fence: number }>;
  private readonly fenceRow: Statement<{ id: string; fence: number }>;

  constructor(private readonly database: SqliteDatabase) {
    const db = database.db;
    this.selectCampaign = db.prepare('SELECT id, stock, issued, last_fence FROM campaigns WHERE id = ?');
    this.selectCouponOf = db.prepare('SELECT * FROM coupons WHERE campaign_id = ? AND user_id = ? LIMIT 1');
    this.countCoupons = db.prepare('SELECT COUNT(*) AS n FROM coupons WHERE campaign_id = ?');
    // The fence: one atomic UPDATE that only lands if no newer lock holder has written the row.
    // `<=`: tokens are unique per holder, so an equal one is the same holder writing again.
    this.saveIssuedFenced = db.prepare('UPDATE campaigns SET issued = @issued, last_fence = @fence WHERE id = @id AND last_fence <= @fence');
    // Fencing the read, not only the write: a holder first stamps the row with its token, so a holder
    // whose lease lapsed meanwhile can no longer write between this read and this holder's write.
    this.fenceRow = db.prepare('UPDATE campaigns SET last_fence = @fence WHERE id = @id AND last_fence <= @fence');
    this.saveIssuedUnfenced = db.prepare('UPDATE campaigns SET issued = @issued WHERE id = @id');
    this.insertCoupon = db.prepare(
      `INSERT INTO coupons (campaign_id, user_id, code, instance, fence, issued_at)
       VALUES (@campaign_id, @user_id, @code, @instance, @fence, @issued_at)`,
    );
    this.insertRejection = db.prepare(
      `INSERT INTO fence_rejections (campaign_id, instance, fence, last_fence, at)
       VALUES (@campaign_id, @instance, @fence, (SELECT last_fence FROM campaigns WHERE id = @campaign_id), @at)`,
    );
    this.upsertFenced = db.prepare(
      `INSERT INTO campaigns (id, stock, issued, last_fence) VALUES (@id, @stock, 0, @fence)
       ON CONFLICT (id) DO UPDATE SET stock = excluded.stock, last_fence = excluded.last_fence
       WHERE campaigns.last_fence <= excluded.last_fence`,
    );
  }

  async findCampaign(id: string): Promise<Campaign | undefined> {
    await this.database.roundTrip();
    const row = this.selectCampaign.get(id);
    return row && toCampaign(row);
  }

  /**
   * Reads the campaign for a fenced read-check-write: stamps the row with `fence` first (refused
   * when a newer holder already did), so no older holder's write can land after this read. A fence
   * on the write alone is not enough: a holder paused past its lease could still write between this
   * read and this holder's write, and both writes would pass (each token ≥ the last one written).
   */
  async findCampaignFenced(id: string, fence: number): Promise<FencedWrite<Campaign> | undefined> {
    await this.database.roundTrip();
    const read = this.database.db.transaction((): FencedWrite<Campaign> | undefined => {
      const stamped = this.fenceRow.run({ id, fence }).changes > 0;
      const row = this.selectCampaign.get(id);
      if (!row) return undefined;
      return stamped ? { accepted: true, value: toCampaign(row) } : { accepted: false, lastFence: row.last_fence };
    });
    return read.immediate();
  }

  async findCouponOf(campaignId: string, userId: string): Promise<Coupon | undefined> {
    await this.database.roundTrip();
    const row = this.selectCouponOf.get(campaignId, userId);
    return row && toCoupon(row);
  }

  async countIssuedCoupons(campaignId: string): Promise<number> {
    await this.database.roundTrip();
    return this.countCoupons.get(campaignId)?.n ?? 0;
  }

  /**
   * Saves the campaign as loaded with one more coupon issued (what an ORM's `save(entity)` sends:
   * the counter value computed from the read, not `issued + 1` in SQL) and inserts the coupon, in
   * one transaction. With a `fence`, the save is refused when a newer lock holder wrote the row
   * since: then nothing is written except a record of the refusal.
   */
  async issueCoupon(loaded: Campaign, userId: string, instance: string, fence: number | undefined): Promise<FencedWrite<Coupon>> {
    await this.database.roundTrip();
    const issue = this.database.db.transaction((): FencedWrite<Coupon> => {
      const now = Date.now();
      if (fence === undefined) {
        this.saveIssuedUnfenced.run({ id: loaded.id, issued: loaded.issued + 1 });
      } else if (this.saveIssuedFenced.run({ id: loaded.id, issued: loaded.issued + 1, fence }).changes === 0) {
        this.insertRejection.run({ campaign_id: loaded.id, instance, fence, at: now });
        return { accepted: false, lastFence: this.selectCampaign.get(loaded.id)?.last_fence ?? 0 };
      }
      const row: Omit<CouponRow, 'id'> = {
        campaign_id: loaded.id,
        user_id: userId,
        code: `CPN-${randomBytes(4).toString('hex').toUpperCase()}`,
        instance,
        fence: fence ?? null,
        issued_at: now,
      };
      const { lastInsertRowid } = this.insertCoupon.run(row);
      return { accepted: true, value: toCoupon({ id: Number(lastInsertRowid), ...row }) };
    });
    // IMMEDIATE: take SQLite's write lock up front, so two instances never both read then upgrade.
    return issue.immediate();
  }

  /** Creates the campaign, or sets its stock; fenced like a claim so it cannot interleave with one. */
  async upsertCampaign(id: string, stock: number, fence: number): Promise<FencedWrite<Campaign>> {
    await this.database.roundTrip();
    const upsert = this.database.db.transaction((): FencedWrite<Campaign> => {
      const landed = this.upsertFenced.run({ id, stock, fence }).changes > 0;
      const row = this.selectCampaign.get(id)!;
      return landed ? { accepted: true, value: toCampaign(row) } : { accepted: false, lastFence: row.last_fence };
    });
    return upsert.immediate();
  }
}
