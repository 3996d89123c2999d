/**
 * @Locked and @Transactional() (@nestjs-cls/transactional, TypeORM adapter, SQLite through better-sqlite3).
 *
 * The lock must be held until the transaction has committed: otherwise the next holder reads the state
 * the previous one has not committed yet and decides on it (the stock it sees is the old stock). Each
 * concurrent claim uses its own SQLite connection (its own DataSource, as a pool would give it), on one
 * file database in WAL mode with deferred transactions, so the transactions really run side by side.
 *
 * What SQLite can show: it is serializable, so it never lets the stale decision through; the second writer's
 * UPDATE fails with SQLITE_BUSY instead (a claim that should have succeeded fails). On a READ COMMITTED database
 * (PostgreSQL, MySQL by default) the same stale read is followed by a successful write: the oversell. So this
 * suite asserts the stale reads themselves — two lock holders reading the same `issued` count, i.e. both about
 * to issue the same coupon — and the failures SQLite turns them into, against the right order, where every
 * holder reads the count its predecessor committed and nothing fails. (No Postgres driver is installed here.)
 *
 * A commit takes time on a real database (a round trip, an fsync); SQLite in-process commits in microseconds,
 * which would hide the window almost always. A TypeORM subscriber delays each COMMIT by COMMIT_MS to model it.
 */
import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { DynamicModule, INestApplicationContext, Module, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ClsModule } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource, EntityManager, EntitySubscriberInterface, EventSubscriber } from 'typeorm';
import { DistributedLockModule, Locked, LockedDecoratorOrderError, LockService } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { sleep } from './locked-helpers';

const COMMIT_MS = 40;
const STOCK = 3;
const CLAIMS = 8;

@EventSubscriber() // TypeORM only instantiates subscribers registered by the decorator
class SlowCommit implements EntitySubscriberInterface {
  beforeTransactionCommit(): Promise<void> {
    return sleep(COMMIT_MS);
  }
}

type Order = 'transaction-outside-lock' | 'lock-outside-transaction';

interface ClaimOutcome {
  /** The `issued` count the claim read while holding the lock (undefined: it failed before reading). */
  read?: number;
  result: 'issued' | 'sold-out' | 'failed';
  error?: string;
}

interface Claimer {
  claim(campaign: string): Promise<'issued' | 'sold-out'>;
}

/** The claim every test runs: read the count, check the stock, write count + 1 and the coupon — one transaction. */
async function claimBody(tx: EntityManager, campaign: string, reads: number[]): Promise<'issued' | 'sold-out'> {
  const [row] = await tx.query<{ issued: number; stock: number }[]>('SELECT issued, stock FROM campaign WHERE id = ?', [campaign]);
  reads.push(row.issued);
  if (row.issued >= row.stock) return 'sold-out';
  await tx.query('UPDATE campaign SET issued = ? WHERE id = ?', [row.issued + 1, campaign]);
  await tx.query('INSERT INTO coupon (campaign) VALUES (?)', [campaign]);
  return 'issued';
}

/** One claimer class per connection: @Transactional names its connection when the class is defined. */
function claimerClass(order: Order, connectionName: string, reads: number[], allowOuterWrapper = true): Type<Claimer> {
  const host = () => TransactionHost.getInstance(connectionName);
  if (order === 'transaction-outside-lock') {
    class TransactionOutsideLock implements Claimer {
      @Transactional(connectionName) // written above: applied last, outermost — the lock is released before COMMIT
      @Locked('campaign:<0>', { allowOuterWrapper })
      async claim(campaign: string) {
        return claimBody(host().tx as EntityManager, campaign, reads);
      }
    }
    return TransactionOutsideLock;
  }
  class LockOutsideTransaction implements Claimer {
    @Locked('campaign:<0>') // written above: outermost — taken before BEGIN, released after COMMIT
    @Transactional(connectionName)
    async claim(campaign: string) {
      return claimBody(host().tx as EntityManager, campaign, reads);
    }
  }
  return LockOutsideTransaction;
}

function databaseModule(token: string, dataSource: DataSource): DynamicModule {
  @Module({})
  class DatabaseModule {}
  return { module: DatabaseModule, providers: [{ provide: token, useValue: dataSource }], exports: [token] };
}

describe('@Locked with @Transactional (real transactions on SQLite, one connection per concurrent claim)', () => {
  let redis: SharedRedis;
  let dir: string;
  const sources: DataSource[] = [];
  const apps: INestApplicationContext[] = [];
  let scenario = 0;

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    dir = mkdtempSync(join(tmpdir(), 'locked-tx-'));
  });

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    for (const source of sources.splice(0)) if (source.isInitialized) await source.destroy();
  });

  afterAll(async () => {
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function openSource(file: string): Promise<DataSource> {
    // timeout 0: a writer finding the database locked fails at once (better-sqlite3 would otherwise block the event loop).
    const source = new DataSource({ type: 'better-sqlite3', database: file, enableWAL: true, timeout: 0, subscribers: [SlowCommit] });
    sources.push(source);
    return source.initialize();
  }

  /** One application with CLAIMS claimers, each on its own connection (DataSource) to one fresh database file. */
  async function start(order: Order, allowOuterWrapper = true): Promise<{ claimers: Claimer[]; reads: number[]; db: DataSource }> {
    scenario++;
    const file = join(dir, `shop-${scenario}.sqlite`);
    const db = await openSource(file);
    await db.query('CREATE TABLE campaign (id TEXT PRIMARY KEY, stock INTEGER NOT NULL, issued INTEGER NOT NULL)');
    await db.query('CREATE TABLE coupon (id INTEGER PRIMARY KEY AUTOINCREMENT, campaign TEXT NOT NULL)');
    await db.query('INSERT INTO campaign (id, stock, issued) VALUES (?, ?, 0)', ['c1', STOCK]);

    const reads: number[] = [];
    const plugins: ClsPluginTransactional[] = [];
    const claimerTypes: Type<Claimer>[] = [];
    for (let i = 0; i < CLAIMS; i++) {
      const connectionName = `s${scenario}-db${i}`;
      const token = `DATA_SOURCE_${connectionName}`;
      plugins.push(
        new ClsPluginTransactional({
          connectionName,
          imports: [databaseModule(token, await openSource(file))],
          adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: token }),
        }),
      );
      claimerTypes.push(claimerClass(order, connectionName, reads, allowOuterWrapper));
    }
    const moduleRef = await Test.createTestingModule({
      imports: [ClsModule.forRoot({ global: true, plugins }), DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: `tx${scenario}` })],
      providers: claimerTypes,
    }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init().catch(async (error: unknown) => {
      // Nest's close() rethrows a failed init without disposing; the lock module's connections are open by then.
      await moduleRef.get(LockService).close();
      throw error;
    });
    apps.push(app);
    return { claimers: claimerTypes.map((t) => app.get(t)), reads, db };
  }

  async function claimAll(claimers: Claimer[]): Promise<ClaimOutcome[]> {
    return Promise.all(
      claimers.map((c) =>
        c.claim('c1').then(
          (result): ClaimOutcome => ({ result }),
          (error: Error): ClaimOutcome => ({ result: 'failed', error: error.message }),
        ),
      ),
    );
  }

  async function committed(db: DataSource): Promise<{ issued: number; coupons: number }> {
    const [{ issued }] = await db.query<{ issued: number }[]>('SELECT issued FROM campaign WHERE id = ?', ['c1']);
    const [{ coupons }] = await db.query<{ coupons: number }[]>('SELECT COUNT(*) AS coupons FROM coupon');
    return { issued, coupons };
  }

  /** Counts below the stock read by more than one holder: each of them was about to issue the same coupon. */
  const staleReads = (reads: number[]) => reads.filter((v, i) => v < STOCK && reads.indexOf(v) !== i);

  it('control — @Transactional written above @Locked: holders read counts not yet committed, and SQLite rejects their writes', async () => {
    const { claimers, reads, db } = await start('transaction-outside-lock');
    const outcomes = await claimAll(claimers);
    const failed = outcomes.filter((o) => o.result === 'failed');
    // Two holders of the lock read the same count: both would issue the same coupon (on READ COMMITTED, both do).
    expect(staleReads(reads).length).toBeGreaterThan(0);
    // More holders saw stock left than there is stock: the oversell, decided under the lock.
    expect(reads.filter((issued) => issued < STOCK).length).toBeGreaterThan(STOCK);
    // SQLite's answer to the second write: the claim fails although stock remained when it ran.
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.every((o) => /SQLITE_BUSY|database is locked/i.test(o.error ?? ''))).toBe(true);
    const { issued, coupons } = await committed(db);
    expect(coupons).toBe(issued);
    console.log(
      `transaction outside lock: ${CLAIMS} claims, stock ${STOCK}: reads ${JSON.stringify(reads)}, ${failed.length} failed, ${issued} issued`,
    );
  });

  it('@Locked written above @Transactional: each holder reads what the previous one committed; exactly the stock is issued, nothing fails', async () => {
    const { claimers, reads, db } = await start('lock-outside-transaction');
    const outcomes = await claimAll(claimers);
    expect(outcomes.filter((o) => o.result === 'failed')).toEqual([]);
    expect(outcomes.filter((o) => o.result === 'issued')).toHaveLength(STOCK);
    expect(reads.slice(0, STOCK)).toEqual([...Array(STOCK).keys()]);
    expect(reads.slice(STOCK)).toEqual(Array(CLAIMS - STOCK).fill(STOCK));
    expect(await committed(db)).toEqual({ issued: STOCK, coupons: STOCK });
  });

  it('a test spy on the locked method (it carries no decorator metadata) is not taken for a decorator above @Locked', async () => {
    class Spied {
      @Locked('spied')
      async run(): Promise<string> {
        return 'ran';
      }
    }
    const spy = jest.spyOn(Spied.prototype, 'run').mockResolvedValue('mocked');
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'spied' })],
      providers: [Spied],
    }).compile();
    moduleRef.useLogger(false);
    apps.push(await moduleRef.init());
    await expect(moduleRef.get(Spied).run()).resolves.toBe('mocked');
    spy.mockRestore();
  });

  it('the wrong order is refused at startup with LockedDecoratorOrderError naming class, method and the fix', async () => {
    const boot = start('transaction-outside-lock', false);
    await expect(boot).rejects.toThrow(LockedDecoratorOrderError);
    await expect(boot).rejects.toThrow(
      /TransactionOutsideLock\.claim: a decorator written above @Locked wraps the locked method.*Write @Locked first \(above @Transactional\)/,
    );
  });
});
