/**
 * Redlock, watchdog off: a lock handed over by a release is extended once to its ttl before it is used. That
 * extend must be owner-checked only. A review found it sent with the fencing token, which makes a Redlock
 * renewal take the key back on nodes where it is free: with the extend delayed past the handed lease (a slow
 * command path), another client took and released the key meanwhile, and the waiter was then given the lock
 * with a fencing token below that client's.
 */
import { LockService } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { sleep } from './workers/support/timing';

describe('Redlock, watchdog off: a handed-over lock whose extend arrives after the handed lease ended', () => {
  const servers: RedisProcess[] = [];
  const services: LockService[] = [];

  beforeAll(async () => {
    servers.push(...(await Promise.all([0, 1, 2].map(() => RedisProcess.start()))));
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  async function make(options: Record<string, unknown> = {}): Promise<LockService> {
    const service = new LockService({ nodes: servers.map((s) => s.url), nodeRecoveryDelay: 0, keyPrefix: 'rwo:', ...options });
    services.push(service);
    await service.onModuleInit();
    return service;
  }

  it('is never given the lock with a fencing token below one another client held meanwhile', async () => {
    const holder = await make();
    const other = await make();
    const waiter = await make({ watchdog: false, waiterLease: 600 });
    // The fault: the waiter's extend goes out 1.5 s late, past the 600 ms handed lease.
    const store = waiter.engine.store as unknown as { extend: (...args: unknown[]) => Promise<boolean> };
    const extend = store.extend.bind(store);
    let delayed = 0;
    store.extend = async (...args: unknown[]) => {
      delayed++;
      await sleep(1_500);
      return extend(...args);
    };
    const held = await holder.acquire('k');
    const waiting = waiter.acquire('k', { ttl: 5_000, waitTimeout: 10_000 });
    await sleep(300);
    await held.release();
    await sleep(900); // the handed lease (≤ 600 ms) has ended, unextended
    const between = await other.tryAcquire('k');
    expect(between).not.toBeNull(); // the key was free: another client held it in between
    await between!.release();
    const lock = await waiting;
    expect(delayed).toBeGreaterThan(0); // the waiter did send the delayed extend
    // Before: the extend took the free nodes back and the waiter got the lock with the handed (older) token.
    expect(lock.fencingToken).toBeGreaterThan(between!.fencingToken);
    expect(lock.isHeld()).toBe(true);
    expect(await lock.release()).toBe(true);
  });
});
