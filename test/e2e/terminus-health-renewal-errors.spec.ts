/**
 * LockHealthIndicator and failed lease renewals, against a real redis-server: a renewal that failed counts
 * while its lock is still held and failing, and no longer once the lock is released or lost. Before, one
 * failed renewal kept the check down for the whole renewalErrorWindow (60 s) after Redis recovered, with
 * nothing held: a liveness probe restarted a healthy instance. Faults made for real: Redis frozen (SIGSTOP),
 * and scripts refused to the library's Redis user (ACL) while plain writes, the probe's, still pass.
 */
import 'reflect-metadata';
import { INestApplication, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { DistributedLockModule, LockLostError, LockService } from '../../lib';
import type { DistributedLockModuleOptions } from '../../lib';
import { LockHealthIndicator } from '../../lib/terminus';
import { pingOnce } from '../harness/redis-ping';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil } from '../unit/core-helpers';

const RENEWAL_FAILED = /a lease renewal failed \d+ ms ago: /;

describe('LockHealthIndicator after failed renewals', () => {
  let redis: RedisProcess;
  let app: INestApplication | undefined;

  beforeEach(async () => {
    redis = await RedisProcess.start();
  });
  afterEach(async () => {
    redis.resume();
    await app?.close();
    app = undefined;
    await redis.stop();
  });

  async function start(options: Partial<DistributedLockModuleOptions>) {
    @Module({
      imports: [TerminusModule.forRoot({ logger: false }), DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'health:', ...options })],
      providers: [LockHealthIndicator],
    })
    class HealthAppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [HealthAppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return { indicator: app.get(LockHealthIndicator), locks: app.get(LockService) };
  }

  /** Freezes Redis until a renewal has timed out, and checks that the freeze really happened. */
  async function freezeUntilRenewalFails(locks: LockService): Promise<void> {
    redis.pause();
    expect(await pingOnce(redis.port, redis.host, 150)).toBe(false);
    expect(await pollUntil(() => locks.getStats().renewalErrors > 0, 4_000, 10)).toBe(true);
  }

  it('is up once the lock whose renewal failed is released, though no renewal succeeded since', async () => {
    // Renewed every 1,000 ms; a failed renewal is retried after 333 ms.
    const { indicator, locks } = await start({ ttl: 3_000, commandTimeout: 300 });
    const lock = await locks.acquire('short-job');
    await freezeUntilRenewalFails(locks);
    redis.resume();
    // Released before the retry (333 ms after the failure) could renew it: no renewal succeeded after the failure.
    expect(await lock.release()).toBe(true);
    expect(locks.getStats()).toMatchObject({ renewals: 0, renewalErrors: 1 });
    const result = await indicator.isHealthy('lock');
    expect(result.lock).toMatchObject({ status: 'up', leases: 0 });
    expect(result.lock.message).toBeUndefined();
  });

  it('is up once the lock whose renewals failed is lost and reported as lost', async () => {
    const { indicator, locks } = await start({ ttl: 1_500, commandTimeout: 300 });
    const lock = await locks.acquire('lapsing');
    const lost = new Promise<unknown>((resolve) => lock.signal.addEventListener('abort', () => resolve(lock.signal.reason), { once: true }));
    await freezeUntilRenewalFails(locks);
    const reason = await lost; // its deadline passed while Redis was frozen
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe('expired');
    redis.resume();
    expect(locks.getStats()).toMatchObject({ renewals: 0, lost: 1 });
    const result = await indicator.isHealthy('lock');
    expect(result.lock).toMatchObject({ status: 'up', leases: 0 });
  });

  it('stays down while a held lock keeps failing to renew though the probe write passes, and is up once a renewal succeeds', async () => {
    // Renewed every 2,000 ms, retried every 666 ms after a failure; the lease lasts 6 s from its last renewal.
    const { indicator, locks } = await start({ ttl: 6_000, commandTimeout: 300 });
    const admin = redis.client();
    const lock = await locks.acquire('long-job');
    // Scripts refused (renewals are scripts), plain writes allowed (the health probe's SET is one).
    await admin.call('ACL', 'SETUSER', 'default', '-@scripting');
    expect(await pollUntil(() => locks.getStats().renewalErrors > 0, 4_000, 10)).toBe(true);
    const errorsThen = locks.getStats().renewalErrors;
    const first = await indicator.isHealthy('lock');
    expect(first.lock).toMatchObject({ status: 'down', leases: 1 });
    expect(first.lock.message).toMatch(RENEWAL_FAILED);
    // Still failing at the next retry: still down.
    expect(await pollUntil(() => locks.getStats().renewalErrors > errorsThen, 2_000, 10)).toBe(true);
    const again = await indicator.isHealthy('lock');
    expect(again.lock.status).toBe('down');
    expect(again.lock.message).toMatch(RENEWAL_FAILED);
    await admin.call('ACL', 'SETUSER', 'default', '+@all');
    expect(await pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'up', 3_000, 50)).toBe(true);
    expect(locks.getStats().renewals).toBeGreaterThan(0);
    expect(lock.isHeld()).toBe(true);
    expect(await lock.release()).toBe(true);
  });
});
