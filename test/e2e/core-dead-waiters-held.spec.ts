/**
 * Dead waiters' places under a lock that stays held. A free lock drops lapsed places as it passes by
 * (core-dead-waiters.spec.ts), but a lock held for weeks (a leader's, renewed by its watchdog) is never
 * free: while a live waiter kept refreshing its own place (which pushes the queue keys' expiry on), the
 * places of every waiter that died meanwhile (kill -9, an OOM kill, an abandon lost to a network blip)
 * stayed queued, one more per dead waiter, for as long as the lock was held. Measured before the fix: 101,
 * 201, 301, 401 entries after four workers of 100 waiters each were killed, 400 of them lapsed.
 *
 * Each crash here queues 100 places from a worker killed with -9; once they lapse, the live waiter's
 * refreshes must drop them while the lock is still held, on a single Redis and on three Redlock nodes.
 */
import type Redis from 'ioredis';
import * as path from 'path';
import { LockService, type DistributedLockModuleOptions } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { RedlockNodes } from '../harness/redlock-nodes';
import { startWorker, type WorkerHandle } from '../harness/worker-process';
import { isAlive, pollUntil } from './workers/support/timing';

const PREFIX = 'dh:';
const KEY = 'leader';
const WAITER_LEASE = 300;
const DEAD_PER_CRASH = 100;
const CRASHES = 3;
/** The places lapse after WAITER_LEASE; the live waiter refreshes every third of it. */
const DROPPED_WITHIN_MS = WAITER_LEASE + 3_000;
const QUEUED_WAITERS = path.join(__dirname, 'workers', 'queued-waiters.worker.ts');

/** Queue entries on one server: a list on a single Redis, a sorted set (by ticket) on a Redlock node. */
type QueueLength = (client: Redis) => Promise<number>;
const listLength: QueueLength = (client) => client.llen(`${PREFIX}{${KEY}}:q`);
const ticketQueueLength: QueueLength = (client) => client.zcard(`${PREFIX}{${KEY}}:q`);

/**
 * Holds KEY with a live waiter queued behind it, and CRASHES times queues DEAD_PER_CRASH places from a
 * worker killed with -9: each time, the lapsed places must be gone while the lock is still held.
 */
async function deadPlacesDropped(
  service: LockService,
  servers: Redis[],
  queueLength: QueueLength,
  workerEnv: Record<string, string>,
  workers: WorkerHandle[],
): Promise<void> {
  const held = await service.acquire(KEY);
  const live = service.acquire(KEY, { waitTimeout: 30_000 });
  live.catch(() => undefined); // a failed case closes the service under it; the case's own assertions report
  const lengths = () => Promise.all(servers.map(queueLength));
  expect(await pollUntil(async () => (await lengths()).every((n) => n === 1), 5_000)).toBe(true);
  for (let crash = 0; crash < CRASHES; crash++) {
    const worker = startWorker(QUEUED_WAITERS, {
      env: { ...workerEnv, KEY, KEY_PREFIX: PREFIX, WAITERS: String(DEAD_PER_CRASH), WAITER_LEASE: String(WAITER_LEASE) },
    });
    workers.push(worker);
    await worker.waitFor((l) => l.event === 'queued', 10_000);
    const queued = await pollUntil(async () => (await lengths()).every((n) => n === DEAD_PER_CRASH + 1), 5_000);
    expect(queued).toBe(true);
    expect((await worker.kill9()).signal).toBe('SIGKILL');
    expect(isAlive(worker.pid)).toBe(false);
    await pollUntil(async () => (await lengths()).every((n) => n === 1), DROPPED_WITHIN_MS, 20);
    // Only the live waiter's place is left, and the lock was held by us all along.
    expect(await lengths()).toEqual(servers.map(() => 1));
    expect(held.isHeld()).toBe(true);
  }
  expect(await held.release()).toBe(true);
  expect(await (await live).release()).toBe(true);
  expect(await lengths()).toEqual(servers.map(() => 0));
}

describe('dead waiters under a lock that stays held', () => {
  const services: LockService[] = [];
  const workers: WorkerHandle[] = [];
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  async function makeService(options: DistributedLockModuleOptions): Promise<LockService> {
    const service = new LockService({ keyPrefix: PREFIX, ttl: 2_000, waiterLease: WAITER_LEASE, shutdownTimeout: 1_000, ...options });
    services.push(service);
    await service.onModuleInit();
    return service;
  }

  describe('on a single Redis', () => {
    let redis: RedisProcess;
    let client: Redis;
    beforeAll(async () => {
      redis = await RedisProcess.start();
      client = redis.client();
    });
    afterAll(async () => {
      client.disconnect();
      await redis.stop();
    });

    it("the live waiter's refreshes drop the lapsed places of killed waiters", async () => {
      const service = await makeService({ redis: redis.url });
      await deadPlacesDropped(service, [client], listLength, { REDIS_URL: redis.url }, workers);
    }, 30_000);
  });

  describe('on three Redlock nodes', () => {
    let nodes: RedlockNodes;
    let clients: Redis[];
    beforeAll(async () => {
      nodes = await RedlockNodes.start(3);
      clients = nodes.clients();
    });
    afterAll(async () => {
      await nodes.stop();
    });

    it("the live waiter's refreshes drop the lapsed places of killed waiters on every node", async () => {
      const service = await makeService({ nodes: nodes.directUrls, nodeRecoveryDelay: 0 });
      await deadPlacesDropped(service, clients, ticketQueueLength, { NODES: nodes.directUrls.join(',') }, workers);
    }, 30_000);
  });
});
