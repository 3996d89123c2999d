/**
 * The sample's last line of defence: the campaign row remembers the highest fencing token that
 * wrote it, and a claim carrying a lower one (a holder whose lease lapsed while it was paused) is
 * refused by one atomic UPDATE — nothing is written, the refusal is recorded.
 */
import { ConfigService } from '@nestjs/config';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { setTimeout as sleep } from 'timers/promises';
import { LockService } from '../../lib';
import { CampaignRepository } from '../../sample/src/campaigns/campaign.repository';
import type { Campaign } from '../../sample/src/campaigns/campaign.entities';
import { SqliteDatabase } from '../../sample/src/database/sqlite-database';
import { killSurvivors, RedisProcess } from '../harness/redis-process';

describe('fenced coupon writes (sample)', () => {
  let dir: string;
  let database: SqliteDatabase;
  let repo: CampaignRepository;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fenced-write-'));
    database = new SqliteDatabase(new ConfigService({ DB_PATH: path.join(dir, 'coupons.sqlite'), DB_LATENCY_MS: 0 }));
    repo = new CampaignRepository(database);
  });

  afterEach(() => {
    database.onApplicationShutdown();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const rows = (sql: string, ...params: unknown[]) => database.db.prepare(sql).all(...params);
  const load = async (id: string): Promise<Campaign> => (await repo.findCampaign(id))!;

  it('refuses a write whose token is lower than the last one that wrote the row, and writes nothing', async () => {
    await repo.upsertCampaign('c1', 10, 100);
    const loadedByStaleHolder = await load('c1'); // fence 150 loads, then stalls
    const fresh = await repo.issueCoupon(await load('c1'), 'alice', 'app-2', 200);
    expect(fresh.accepted).toBe(true);

    const stale = await repo.issueCoupon(loadedByStaleHolder, 'bob', 'app-1', 150);

    expect(stale).toEqual({ accepted: false, lastFence: 200 });
    expect(await load('c1')).toEqual({ id: 'c1', stock: 10, issued: 1, lastFence: 200 });
    expect(rows('SELECT user_id, fence FROM coupons')).toEqual([{ user_id: 'alice', fence: 200 }]);
    expect(rows('SELECT campaign_id, instance, fence, last_fence FROM fence_rejections')).toEqual([
      { campaign_id: 'c1', instance: 'app-1', fence: 150, last_fence: 200 },
    ]);
  });

  it("a stale holder writing between the next holder's read and write: the fenced read makes the stale write lose (no oversell)", async () => {
    await repo.upsertCampaign('c1', 1, 100);
    // A (fence 150) reads with its fence, then stalls past its lease.
    const readByA = await repo.findCampaignFenced('c1', 150);
    expect(readByA).toMatchObject({ accepted: true, value: { issued: 0 } });
    // B (fence 200) gets the lock and reads: the last coupon is still there.
    const readByB = await repo.findCampaignFenced('c1', 200);
    expect(readByB).toMatchObject({ accepted: true, value: { issued: 0, lastFence: 200 } });
    // A wakes up and writes before B does. With a fence on the write alone (token 150 >= 100, the last
    // one written) this landed, then B's write (200 >= 150) landed too: two coupons from a stock of one.
    expect(await repo.issueCoupon((readByA as { value: Campaign }).value, 'alice', 'app-1', 150)).toEqual({ accepted: false, lastFence: 200 });
    expect((await repo.issueCoupon((readByB as { value: Campaign }).value, 'bob', 'app-2', 200)).accepted).toBe(true);
    expect(rows('SELECT user_id FROM coupons')).toEqual([{ user_id: 'bob' }]);
    expect(await load('c1')).toMatchObject({ issued: 1, stock: 1 });
    // And a holder older than the last read is refused at its read already.
    expect(await repo.findCampaignFenced('c1', 180)).toEqual({ accepted: false, lastFence: 200 });
    expect(await repo.findCampaignFenced('nope', 300)).toBeUndefined();
  });

  it('accepts the same holder writing again (equal token) and any newer holder', async () => {
    await repo.upsertCampaign('c1', 10, 100);
    expect((await repo.issueCoupon(await load('c1'), 'alice', 'app-1', 100)).accepted).toBe(true);
    expect((await repo.issueCoupon(await load('c1'), 'bob', 'app-1', 101)).accepted).toBe(true);
    expect(await load('c1')).toMatchObject({ issued: 2, lastFence: 101 });
  });

  it('a stock change with a stale token is refused like a claim', async () => {
    await repo.upsertCampaign('c1', 10, 100);
    await repo.issueCoupon(await load('c1'), 'alice', 'app-1', 300);
    expect(await repo.upsertCampaign('c1', 999, 200)).toEqual({ accepted: false, lastFence: 300 });
    expect(await load('c1')).toMatchObject({ stock: 10, lastFence: 300 });
  });

  it("without a token (LOCK_MODE=in-process) nothing protects the row: the incident's lost update", async () => {
    await repo.upsertCampaign('c1', 10, 100);
    const first = await load('c1');
    const second = await load('c1'); // another instance read the same row meanwhile
    await repo.issueCoupon(first, 'alice', 'app-1', undefined);
    await repo.issueCoupon(second, 'bob', 'app-2', undefined);
    expect(await load('c1')).toMatchObject({ issued: 1 }); // two coupons, counter says one
    expect(rows('SELECT COUNT(*) AS n FROM coupons')).toEqual([{ n: 2 }]);
  });

  describe('with real lock tokens', () => {
    let redis: RedisProcess;
    let locks: LockService;

    beforeAll(async () => {
      redis = await RedisProcess.start();
      locks = new LockService({ redis: redis.url, keyPrefix: 'fenced-test:' });
      await locks.onModuleInit();
    });

    afterAll(async () => {
      await locks?.close();
      await redis?.stop();
    });

    it('a holder whose lease lapsed cannot write after the next holder did', async () => {
      const setup = await locks.acquire('campaign:c2');
      await repo.upsertCampaign('c2', 1, setup.fencingToken);
      await setup.release();

      // A takes the lock without renewal and "pauses" past its TTL after reading the campaign.
      const a = await locks.acquire('campaign:c2', { ttl: 200, watchdog: false });
      const readByA = await load('c2');
      await sleep(300);
      expect(a.isHeld()).toBe(false);

      // B gets the free key with a larger token and issues the last coupon.
      const b = await locks.acquire('campaign:c2', { onBusy: 'throw' });
      expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
      expect((await repo.issueCoupon(await load('c2'), 'bob', 'app-2', b.fencingToken)).accepted).toBe(true);
      await b.release();

      // A wakes up and writes what it decided before the pause: stock 1, issued 0 -> would oversell.
      const late = await repo.issueCoupon(readByA, 'alice', 'app-1', a.fencingToken);
      expect(late).toEqual({ accepted: false, lastFence: b.fencingToken });
      expect(rows('SELECT user_id FROM coupons WHERE campaign_id = ?', 'c2')).toEqual([{ user_id: 'bob' }]);
      expect(await a.release()).toBe(false);
    });
  });

  afterAll(() => expect(killSurvivors()).toEqual([]));
});
