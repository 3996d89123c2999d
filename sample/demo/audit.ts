import Database from 'better-sqlite3';

/** What really is in the shared database after a round, counted from the rows, not from the app's counters. */
export interface CampaignAudit {
  stock: number;
  /** The campaign row's counter (lags behind the rows after lost updates). */
  counter: number;
  /** Coupon rows. */
  coupons: number;
  oversold: number;
  /** Users holding two or more coupons of the campaign. */
  duplicateUsers: number;
  /** Writes the fence refused (a lock holder whose lease had expired). */
  fenceRejections: number;
  /** Coupons per instance name. */
  byInstance: Record<string, number>;
}

export interface CronAudit {
  /** Whole seconds inside the window: the ticks a 1-second cron should have run. */
  expectedTicks: number;
  /** Ticks that ran on at least one instance. */
  ticksRun: number;
  /** Fewest / most instances that ran one tick. */
  minInstances: number;
  maxInstances: number;
  /** Total runs of the job (a tick run by 3 instances counts 3). */
  runs: number;
}

/** A reading-only view of the database the instances share, as an auditor would look at it. */
export class Auditor {
  private readonly db: Database.Database;

  constructor(dbPath: string) {
    this.db = new Database(dbPath, { fileMustExist: true });
    this.db.pragma('busy_timeout = 10000');
  }

  campaign(campaignId: string): CampaignAudit {
    const row = this.db.prepare('SELECT stock, issued FROM campaigns WHERE id = ?').get(campaignId) as { stock: number; issued: number } | undefined;
    if (!row) throw new Error(`campaign ${campaignId} does not exist`);
    const count = (sql: string) => (this.db.prepare(sql).get(campaignId) as { n: number }).n;
    const coupons = count('SELECT COUNT(*) AS n FROM coupons WHERE campaign_id = ?');
    const duplicateUsers = count(
      'SELECT COUNT(*) AS n FROM (SELECT user_id FROM coupons WHERE campaign_id = ? GROUP BY user_id HAVING COUNT(*) > 1)',
    );
    const fenceRejections = count('SELECT COUNT(*) AS n FROM fence_rejections WHERE campaign_id = ?');
    const byInstance: Record<string, number> = {};
    for (const r of this.db
      .prepare('SELECT instance, COUNT(*) AS n FROM coupons WHERE campaign_id = ? GROUP BY instance ORDER BY instance')
      .all(campaignId) as {
      instance: string;
      n: number;
    }[]) {
      byInstance[r.instance] = r.n;
    }
    return {
      stock: row.stock,
      counter: row.issued,
      coupons,
      oversold: Math.max(0, coupons - row.stock),
      duplicateUsers,
      fenceRejections,
      byInstance,
    };
  }

  /** Coupons written by instances other than `instance` between two wall-clock instants. */
  couponsByOthersBetween(campaignId: string, instance: string, fromMs: number, toMs: number): number {
    return (
      this.db
        .prepare('SELECT COUNT(*) AS n FROM coupons WHERE campaign_id = ? AND instance <> ? AND issued_at >= ? AND issued_at <= ?')
        .get(campaignId, instance, fromMs, toMs) as { n: number }
    ).n;
  }

  /** Settlement runs per tick for the whole seconds in [fromMs, toMs). */
  cron(fromMs: number, toMs: number): CronAudit {
    const first = Math.ceil(fromMs / 1000);
    const last = Math.floor(toMs / 1000) - 1;
    const rows = this.db.prepare('SELECT tick, COUNT(*) AS n FROM settlements WHERE tick BETWEEN ? AND ? GROUP BY tick').all(first, last) as {
      tick: number;
      n: number;
    }[];
    const counts = rows.map((r) => r.n);
    return {
      expectedTicks: Math.max(0, last - first + 1),
      ticksRun: rows.length,
      minInstances: counts.length ? Math.min(...counts) : 0,
      maxInstances: counts.length ? Math.max(...counts) : 0,
      runs: counts.reduce((a, b) => a + b, 0),
    };
  }

  close(): void {
    this.db.close();
  }
}
