/**
 * `extend()` of a nested handle (withLock on a key its caller already holds) extends the outer locks it borrows
 * keys from. Without a ttl, each outer lock is extended by its own ttl, as its own `extend()` would be: before,
 * the nested call's ttl (often the module default) was passed on, so a helper calling `currentLock().extend()`
 * inside a nested call cut an outer lease taken for minutes to the default, and the watchdog renewed to that
 * from then on. An explicit ttl is still given to every lock. Read on the server: each key's PTTL.
 */
import type Redis from 'ioredis';
import { LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { RedlockNodes } from '../harness/redlock-nodes';
import { redisSuite, sleep } from './core-helpers';

/** The module default ttl, the nested calls' own. */
const DEFAULT_TTL = 3_000;
/** The outer lock's ttl, far from the default. */
const OUTER_TTL = 60_000;

/** How the cases read a key's expiry and make services, on one Redis or on Redlock nodes. */
interface Store {
  service(options?: Record<string, unknown>): Promise<LockService>;
  /** PTTL of `key`'s lock on every server (one for a single Redis). */
  pttl(key: string): Promise<number[]>;
}

function describeNestedExtend(mode: string, store: () => Store): void {
  describe(`extend() on a nested handle (${mode})`, () => {
    it("without a ttl, extends the outer lock by the outer lock's ttl, not the nested call's", async () => {
      const locks = await store().service();
      let after: number[] = [];
      await locks.withLock(
        'ne:own-ttl',
        () =>
          locks.withLock('ne:own-ttl', async (inner) => {
            await inner.extend();
            after = await store().pttl('ne:own-ttl');
          }),
        { ttl: OUTER_TTL, watchdog: false },
      );
      for (const left of after) expect(left).toBeGreaterThan(OUTER_TTL - 5_000);
    });

    it("keeps the watchdog renewing the outer lock to the outer lock's ttl", async () => {
      // Outer 4.5 s, renewed every 1.5 s; the nested call's ttl 1 s (Redlock's per-node bound is a tenth of the
      // default ttl: 100 ms, not a loaded machine's 30 ms). After 2.6 s, only a renewal to 4.5 s leaves over 2.4 s;
      // without a renewal about 1.9 s are left, and after renewals to 1 s at most 1 s.
      const locks = await store().service({ ttl: 1_000 });
      let after: number[] = [];
      await locks.withLock(
        'ne:watchdog',
        () =>
          locks.withLock('ne:watchdog', async (inner) => {
            await inner.extend();
            await sleep(2_600);
            after = await store().pttl('ne:watchdog');
          }),
        { ttl: 4_500 },
      );
      for (const left of after) expect(left).toBeGreaterThan(2_400);
    });

    it("extends the nested handle's own keys by its own ttl, and gives an explicit ttl to every lock", async () => {
      const locks = await store().service();
      let byDefault: number[][] = [];
      let explicit: number[][] = [];
      await locks.withLock(
        'ne:outer',
        () =>
          locks.withLock(['ne:outer', 'ne:inner'], async (inner) => {
            await inner.extend();
            byDefault = [await store().pttl('ne:outer'), await store().pttl('ne:inner')];
            await inner.extend(10_000);
            explicit = [await store().pttl('ne:outer'), await store().pttl('ne:inner')];
          }),
        { ttl: OUTER_TTL, watchdog: false },
      );
      for (const left of byDefault[0]) expect(left).toBeGreaterThan(OUTER_TTL - 5_000);
      for (const left of byDefault[1]) expect(left).toBeGreaterThan(DEFAULT_TTL - 1_000);
      for (const left of byDefault[1]) expect(left).toBeLessThanOrEqual(DEFAULT_TTL);
      for (const left of explicit.flat()) expect(left).toBeGreaterThan(9_000);
      for (const left of explicit.flat()) expect(left).toBeLessThanOrEqual(10_000);
    });
  });
}

describe('single Redis', () => {
  const suite = redisSuite();
  describeNestedExtend('single Redis', () => ({
    service: (options = {}) => suite.pool.make({ ttl: DEFAULT_TTL, ...options }),
    pttl: async (key) => [await suite.client.pttl(lockRedisKeys('test:', key).lock)],
  }));
});

// The store's extend differs (a majority of nodes, each owner-checked); the ttl each lock is extended by is the same.
describe('Redlock', () => {
  let nodes: RedlockNodes;
  let direct: Redis[];
  const services: LockService[] = [];
  beforeAll(async () => {
    nodes = await RedlockNodes.start(3);
    direct = nodes.clients();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
  });
  afterAll(() => nodes?.stop());
  describeNestedExtend('Redlock', () => ({
    async service(options = {}) {
      const service = new LockService({ nodes: nodes.directUrls, keyPrefix: 'test:', nodeRecoveryDelay: 0, ttl: DEFAULT_TTL, ...options });
      services.push(service);
      await service.onModuleInit();
      return service;
    },
    pttl: (key) => Promise.all(direct.map((c) => c.pttl(lockRedisKeys('test:', key).lock))),
  }));
});
