/**
 * LockHealthIndicator (nestjs-distributed-lock/terminus) against real redis-server processes, each
 * fault made for real: Redis frozen (SIGSTOP) and killed, the wake-channel subscriber kept out by
 * Redis itself, renewals slowed by a TCP proxy until a lease nears its deadline, renewals failing,
 * and a Redis that answers PING but refuses or holds every write (out of memory, CLIENT PAUSE WRITE,
 * demoted to a replica): the probe writes, as every lock call does.
 * Ends with GET /health over HTTP in a Nest application with TerminusModule.
 */
import 'reflect-metadata';
import { Controller, Get, INestApplication, Module } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { DistributedLockModule, LockOptionsError, LockService } from '../../lib';
import type { DistributedLockModuleOptions } from '../../lib';
import { LockHealthIndicator, type LockHealthOptions } from '../../lib/terminus';
import { processState } from './history/faults';
import { RedisProcess } from '../harness/redis-process';
import { TcpProxy } from '../harness/tcp-proxy';
import { pollUntil, sleep } from '../unit/core-helpers';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly lockHealth: LockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.lockHealth.isHealthy('lock')]);
  }
}

/** What a user writes: TerminusModule, the indicator among the providers, the lock module global. */
function healthApp(options: DistributedLockModuleOptions) {
  @Module({
    imports: [TerminusModule.forRoot({ logger: false }), DistributedLockModule.forRoot({ keyPrefix: 'health:', ...options })],
    controllers: [HealthController],
    providers: [LockHealthIndicator],
  })
  class HealthAppModule {}
  return HealthAppModule;
}

describe('LockHealthIndicator', () => {
  let redis: RedisProcess;
  let app: INestApplication | undefined;
  let proxy: TcpProxy | undefined;

  beforeEach(async () => {
    redis = await RedisProcess.start();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await proxy?.stop();
    proxy = undefined;
    await redis.stop();
  });

  async function start(options: Partial<DistributedLockModuleOptions> = {}) {
    const moduleRef = await Test.createTestingModule({ imports: [healthApp({ redis: redis.url, ...options })] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return { indicator: app.get(LockHealthIndicator), locks: app.get(LockService) };
  }

  /** isHealthy and how long it took to answer (ms). */
  async function timed<T>(check: () => Promise<T>): Promise<{ result: T; ms: number }> {
    const from = performance.now();
    const result = await check();
    return { result, ms: performance.now() - from };
  }

  it('is up against a reachable Redis, with the round trip in the data', async () => {
    const { indicator, locks } = await start();
    const lock = await locks.acquire('held');
    const result = await indicator.isHealthy('lock');
    await lock.release();
    expect(result.lock).toMatchObject({ status: 'up', wakeChannel: 'idle', leases: 1, laggingLeases: 0 });
    expect(result.lock.roundTripMs).toBeGreaterThanOrEqual(0);
    expect(result.lock.message).toBeUndefined();
  });

  it('is down within commandTimeout when Redis is frozen (SIGSTOP), and up again once it runs', async () => {
    const commandTimeout = 400;
    const { indicator } = await start({ commandTimeout });
    redis.pause();
    try {
      // The fault happened: redis-server is stopped (the kernel stops it asynchronously: a read at once may still see it running).
      expect(await pollUntil(() => processState(redis.pid) === 'T', 500, 5)).toBe(true);
      const { result, ms } = await timed(() => indicator.isHealthy('lock'));
      expect(result.lock.status).toBe('down');
      expect(result.lock.message).toMatch(/Redis did not answer health probe within 400 ms/);
      expect(result.lock.roundTripMs).toBeUndefined();
      // Bounded by commandTimeout (plus timer slack on a busy 2-core machine), not by TCP timeouts.
      expect(ms).toBeGreaterThanOrEqual(commandTimeout - 5);
      expect(ms).toBeLessThan(commandTimeout + 1_000);
    } finally {
      redis.resume();
    }
    expect((await indicator.isHealthy('lock')).lock.status).toBe('up');
  });

  /** An acquire now: what it failed with (the fault is real), or 'acquired'. */
  async function acquireOutcome(locks: LockService, key: string): Promise<string> {
    return locks.acquire(key, { onBusy: 'throw' }).then(
      async (lock) => (await lock.release(), 'acquired'),
      (error: Error) => `${error.constructor.name}: ${error.message}`,
    );
  }

  describe('is down while Redis answers PING but refuses or holds every write', () => {
    it('out of memory (maxmemory reached, noeviction): down with the server refusal, up once there is room', async () => {
      const { indicator, locks } = await start({ commandTimeout: 300 });
      const admin = redis.client();
      expect(await admin.ping()).toBe('PONG');
      await admin.config('SET', 'maxmemory', '1'); // the default policy is noeviction
      try {
        expect(await acquireOutcome(locks, 'oom')).toMatch(/^LockConnectionError: .*OOM command not allowed/);
        const result = await indicator.isHealthy('lock');
        expect(result.lock.status).toBe('down');
        expect(result.lock.message).toMatch(/Redis health probe failed: OOM command not allowed/);
        expect(result.lock.roundTripMs).toBeUndefined();
      } finally {
        await admin.config('SET', 'maxmemory', '0');
      }
      expect((await indicator.isHealthy('lock')).lock.status).toBe('up');
      expect(await acquireOutcome(locks, 'oom')).toBe('acquired');
    });

    it('CLIENT PAUSE WRITE: down within commandTimeout, as the acquire times out', async () => {
      const commandTimeout = 300;
      const { indicator, locks } = await start({ commandTimeout });
      const admin = redis.client();
      await admin.call('CLIENT', 'PAUSE', '5000', 'WRITE');
      try {
        expect(await admin.ping()).toBe('PONG');
        // The check first: a paused write holds every later command of its connection, a PING included.
        const { result, ms } = await timed(() => indicator.isHealthy('lock'));
        expect(result.lock.status).toBe('down');
        expect(result.lock.message).toMatch(/Redis did not answer health probe within 300 ms/);
        expect(ms).toBeLessThan(commandTimeout + 1_000);
        expect(await acquireOutcome(locks, 'paused')).toMatch(/^LockConnectionError: Redis did not answer acquire within 300 ms/);
      } finally {
        await admin.call('CLIENT', 'UNPAUSE');
      }
      expect((await indicator.isHealthy('lock')).lock.status).toBe('up');
    });

    it('demoted to a replica (READONLY): down with the server refusal, up once it is a primary again', async () => {
      const { indicator, locks } = await start({ commandTimeout: 300 });
      const admin = redis.client();
      await admin.call('REPLICAOF', '127.0.0.1', '1'); // a primary nobody runs: it stays a read-only replica
      try {
        expect(await acquireOutcome(locks, 'demoted')).toMatch(/^LockConnectionError: .*READONLY/);
        const result = await indicator.isHealthy('lock');
        expect(result.lock.status).toBe('down');
        expect(result.lock.message).toMatch(/Redis health probe failed: READONLY/);
      } finally {
        await admin.call('REPLICAOF', 'NO', 'ONE');
      }
      expect((await indicator.isHealthy('lock')).lock.status).toBe('up');
    });

    it('with replicaAcks and no replica to confirm: down, as every acquire fails', async () => {
      const { indicator, locks } = await start({ replicaAcks: 1, replicaAckTimeout: 100, commandTimeout: 500 });
      expect(await acquireOutcome(locks, 'unconfirmed')).toMatch(/^LockConnectionError: .*only 0 of 1 replicas confirmed/);
      const result = await indicator.isHealthy('lock');
      expect(result.lock.status).toBe('down');
      expect(result.lock.message).toMatch(/health probe's write was confirmed by only 0 of 1 replicas/);
    });

    it("is up for a Redis user allowed only the locks' keys (ACL ~<keyPrefix>{*): the probe writes in their namespace", async () => {
      const admin = redis.client();
      await admin.call('ACL', 'SETUSER', 'locker', 'on', '>pw', '~health:{*', '&*', '+@all');
      const { indicator, locks } = await start({ redis: `redis://locker:pw@127.0.0.1:${redis.port}` });
      expect(await locks.withLock('order:1', () => 'ran')).toBe('ran');
      const result = await indicator.isHealthy('lock');
      expect(result.lock).toMatchObject({ status: 'up' });
    });

    it('writes nothing but its own key under the keyPrefix, with a short expiry', async () => {
      const { indicator } = await start();
      const admin = redis.client();
      expect((await indicator.isHealthy('lock')).lock.status).toBe('up');
      expect(await admin.keys('*')).toEqual(['health:{health}:probe']);
      const pttl = await admin.pttl('health:{health}:probe');
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(1_000);
    });
  });

  it('is down at once when the Redis process is killed', async () => {
    const { indicator } = await start({ commandTimeout: 2_000 });
    const exit = await redis.kill9();
    expect(exit.signal).toBe('SIGKILL');
    // The client notices the closed socket; from then on calls are refused without waiting.
    await sleep(50);
    const { result, ms } = await timed(() => indicator.isHealthy('lock'));
    expect(result.lock.status).toBe('down');
    expect(result.lock.message).toMatch(/health probe/);
    expect(ms).toBeLessThan(2_000);
  });

  it('is down while the wake-channel subscriber cannot connect, up once it is back', async () => {
    const { indicator, locks } = await start({ commandTimeout: 500 });
    // A wait subscribes the wake channel (it is made at the first wait, not before), once its first
    // attempt is answered within the wait: on a loaded machine that attempt alone outlasted a 100 ms
    // waitTimeout (a full run read 'idle'), so wait again until one got that far (bounded).
    const holder = await locks.acquire('busy');
    const waitedOnce = async () => {
      await expect(locks.acquire('busy', { waitTimeout: 100 })).rejects.toThrow();
      return (await indicator.isHealthy('lock')).lock.wakeChannel !== 'idle';
    };
    expect(await pollUntil(waitedOnce, 10_000, 0)).toBe(true);
    expect((await indicator.isHealthy('lock')).lock).toMatchObject({ status: 'up', wakeChannel: 'subscribed' });

    // Redis refuses new connections, then the subscriber's connection is killed: it cannot come back.
    const admin = redis.client();
    const connected = Number(/connected_clients:(\d+)/.exec(await admin.info('clients'))![1]);
    await admin.config('SET', 'maxclients', String(connected - 1));
    expect(await admin.client('KILL', 'TYPE', 'pubsub')).toBe(1);
    // The client learns of the closed socket on its next read.
    expect(await pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'down', 2_000, 20)).toBe(true);
    await sleep(300); // reconnection attempts come and are refused: it stays down
    const result = await indicator.isHealthy('lock');
    expect(result.lock).toMatchObject({ status: 'down', wakeChannel: 'disconnected' });
    expect(result.lock.message).toMatch(/wake-channel subscriber is not connected/);
    expect(result.lock.message).not.toMatch(/health probe/); // the command connection is fine
    expect(result.lock.roundTripMs).toBeGreaterThanOrEqual(0);

    await admin.config('SET', 'maxclients', '10000');
    expect(await pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'up', 10_000, 100)).toBe(true);
    await holder.release();
  });

  it('is down while the watchdog is not keeping up: a renewal so slow that a held lease nears its deadline', async () => {
    proxy = await TcpProxy.start(redis.port);
    const ttl = 3_000; // renewed every 1,000 ms; deadline 2,968 ms after the acquire was sent
    const { indicator, locks } = await start({ redis: proxy.url, ttl, commandTimeout: 2_500 });
    const sentAt = performance.now();
    const lock = await locks.acquire('slow');
    // From now on every round trip takes 1,600 ms: the renewal sent at ~1,000 ms is answered at
    // ~2,600 ms, so from ~1,968 ms the lease has less than one renewal interval left.
    proxy.setDelay(800);
    await sleep(2_150 - (performance.now() - sentAt));
    const checking = indicator.isHealthy('lock', { maxRoundTrip: 2_400 }); // reads the leases as it is called
    // Fast again for what is sent from now on (the next renewal included), or the lease would really lapse.
    proxy.setDelay(0);
    const result = await checking;
    expect(result.lock).toMatchObject({ status: 'down', leases: 1, laggingLeases: 1 });
    expect(result.lock.message).toMatch(/watchdog is not keeping up: 1 held lease/);
    expect(result.lock.message).not.toMatch(/health probe/);
    // The slow renewal still landed in time: the lock was never lost, and the check recovers.
    expect(await pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'up', 5_000, 50)).toBe(true);
    expect(lock.isHeld()).toBe(true);
    await lock.release();
  });

  it('stays up through an ordinary handover: a handed-over lease starts with the waiter lease left, which is on schedule', async () => {
    // Defaults: ttl 30 s (renewed every 10 s), waiterLease 3 s, so a handed-over lease starts with under 3 s left.
    const { indicator, locks } = await start();
    const other = new LockService({ redis: redis.url, keyPrefix: 'health:' });
    try {
      const held = await other.acquire('handed');
      let waited = true;
      const waiting = locks.acquire('handed').finally(() => (waited = !held.isHeld()));
      await sleep(300);
      expect(await held.release()).toBe(true);
      const lock = await waiting;
      expect(waited).toBe(true); // it queued behind `other` and was handed the lock
      // Before: down ("watchdog is not keeping up", least left ~2,900 ms) until the first renewal, about 1 s later.
      const checks = [];
      for (let i = 0; i < 5; i++) {
        checks.push((await indicator.isHealthy('lock')).lock);
        await sleep(100);
      }
      for (const check of checks) expect(check).toMatchObject({ status: 'up', leases: 1, laggingLeases: 0 });
      expect(lock.isHeld()).toBe(true);
      await lock.release();
    } finally {
      await other.close();
    }
  });

  it('is down after a renewal failed, until one succeeds again', async () => {
    proxy = await TcpProxy.start(redis.port);
    const { indicator, locks } = await start({ redis: proxy.url, ttl: 3_000, commandTimeout: 300 });
    const lock = await locks.acquire('renewing');
    proxy.blackhole(true); // the renewal at ~1,000 ms times out at ~1,300 ms
    expect(await pollUntil(() => locks.getStats().renewalErrors > 0, 3_000, 20)).toBe(true);
    proxy.blackhole(false);
    const result = await indicator.isHealthy('lock');
    expect(result.lock.status).toBe('down');
    expect(result.lock.message).toMatch(/a lease renewal failed \d+ ms ago: /);
    // A later renewal succeeds (the retry comes within the lease): healthy again.
    expect(await pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'up', 5_000, 50)).toBe(true);
    await lock.release();
  });

  it('is down once the LockService is closing, without a round trip', async () => {
    const { indicator, locks } = await start();
    await locks.close();
    const result = await indicator.isHealthy('lock');
    expect(result.lock).toMatchObject({ status: 'down', wakeChannel: 'closed', message: 'the LockService is shutting down' });
    expect(result.lock.roundTripMs).toBeUndefined();
  });

  it('refuses a bad option with LockOptionsError naming it', async () => {
    const { indicator } = await start();
    await expect(indicator.isHealthy('lock', { maxRoundTrip: -1 })).rejects.toThrow(LockOptionsError);
    await expect(indicator.isHealthy('lock', { maxRoundTrip: -1 })).rejects.toThrow(/"maxRoundTrip"/);
    await expect(indicator.isHealthy('')).rejects.toThrow(/"key"/);
  });

  it('refuses a misspelt option naming the one meant, and options that are not an object', async () => {
    const { indicator } = await start();
    const misspelt = { maxRoundtrip: 5 } as unknown as LockHealthOptions;
    await expect(indicator.isHealthy('lock', misspelt)).rejects.toThrow(LockOptionsError);
    await expect(indicator.isHealthy('lock', misspelt)).rejects.toThrow(
      /"isHealthy options.maxRoundtrip": is not an option; did you mean maxRoundTrip\?/,
    );
    for (const wrong of [5, 'fast', [], null]) {
      await expect(indicator.isHealthy('lock', wrong as unknown as LockHealthOptions)).rejects.toThrow(
        /"isHealthy options": expected an options object/,
      );
    }
    // Refused before any round trip, and the right options still pass.
    expect((await indicator.isHealthy('lock', { maxRoundTrip: 1_000, renewalErrorWindow: 0 })).lock.status).toBe('up');
  });

  it('GET /health answers 200 while healthy and 503 with the reason while Redis is frozen', async () => {
    await start({ commandTimeout: 400 });
    const ok = await request(app!.getHttpServer()).get('/health').expect(200);
    expect(ok.body).toMatchObject({ status: 'ok', info: { lock: { status: 'up' } } });
    redis.pause();
    try {
      const down = await request(app!.getHttpServer()).get('/health').expect(503);
      expect(down.body).toMatchObject({ status: 'error', error: { lock: { status: 'down' } } });
      expect(down.body.error.lock.message).toMatch(/health probe/);
    } finally {
      redis.resume();
    }
  });
});
