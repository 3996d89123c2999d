/**
 * T13 (a, b): app.close() while a @Locked body runs outside any HTTP request: a provider method
 * called directly, an @OnEvent handler, an @Interval job. Shutdown drains (DESIGN.md invariant 8):
 * the body's signal aborts with LockLostError('shutdown'), the lease keeps being renewed while the
 * body runs, a contender in another service enters only after the body ended, and the key is freed
 * the moment the body returns. A body that outlives shutdownTimeout keeps its key: renewals stop,
 * the lease lapses by TTL, the key is logged, and it is never deleted under the running code.
 */
import 'reflect-metadata';
import { INestApplicationContext, Injectable, Module, Provider } from '@nestjs/common';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Interval, ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { performance } from 'perf_hooks';
import { DistributedLockModule, Lock, LockLostError, LockService, LockServiceClosedError, Locked, currentLock } from '../../lib';
import type { DistributedLockModuleOptions } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { ServicePool } from '../unit/core-helpers';
import { sleep } from './locked-helpers';

const PREFIX = 't13:';
const TTL = 1_000;

/** One body the test starts and ends: it reports its lock when it enters, and when it returned. */
class Body {
  lock?: Lock;
  endedAt?: number;
  readonly entered: Promise<Lock>;
  private enter!: (lock: Lock) => void;
  private readonly done: Promise<void>;
  /** Lets the body return. */
  finish!: () => void;

  constructor() {
    this.entered = new Promise((resolve) => (this.enter = resolve));
    this.done = new Promise((resolve) => (this.finish = resolve));
  }

  /** Reports that the body runs, under the lock of this call. */
  arrive(): Lock {
    this.lock = currentLock()!;
    this.enter(this.lock);
    return this.lock;
  }

  async run(): Promise<string> {
    this.arrive();
    await this.done;
    this.endedAt = performance.now();
    return 'finished';
  }
}

let body = new Body();
/** Ticks of the @Interval job skipped (fail-fast) because the first one still runs the body. */
const seen = { skippedTicks: 0 };

@Injectable()
class Settlement {
  @Locked('settle:direct', { onBusy: 'fail-fast' })
  async direct(): Promise<string | undefined> {
    return body.run();
  }

  /** Once its signal aborts (shutdown), calls a @Locked method on its own key, then one on a new key. */
  @Locked('settle:nested')
  async nesting(): Promise<string[]> {
    const signal = body.arrive().signal;
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    const outcome = (call: Promise<string>) => call.catch((error: Error) => error.constructor.name);
    return [await outcome(this.sameKey()), await outcome(this.otherKey())];
  }

  @Locked('settle:nested')
  async sameKey(): Promise<string> {
    return `ran under ${currentLock()!.key}`;
  }

  @Locked('settle:other')
  async otherKey(): Promise<string> {
    return 'ran under settle:other';
  }
}

@Injectable()
class SettlementEvents {
  @OnEvent('settle.requested', { async: true, promisify: true })
  @Locked('settle:event')
  async onRequested(): Promise<void> {
    await body.run();
  }
}

@Injectable()
class SettlementTicker {
  @Interval('settle-tick', 20)
  @Locked('settle:tick', { onBusy: 'fail-fast', fallback: () => void seen.skippedTicks++ })
  async tick(): Promise<void> {
    await body.run();
  }
}

interface Kind {
  name: string;
  key: string;
  providers: Provider[];
  /** Starts the body; resolves when the caller (method, event emitter, scheduler) sees it end. */
  start(app: INestApplicationContext): Promise<unknown>;
}

const KINDS: Kind[] = [
  { name: 'a provider method called directly', key: 'settle:direct', providers: [Settlement], start: (app) => app.get(Settlement).direct() },
  {
    name: 'an @OnEvent handler',
    key: 'settle:event',
    providers: [SettlementEvents],
    start: (app) => app.get(EventEmitter2).emitAsync('settle.requested'),
  },
  // The scheduler starts it by itself, 20 ms after init.
  { name: 'an @Interval job', key: 'settle:tick', providers: [SettlementTicker], start: () => body.entered },
];

describe('T13 shutdown drains a running non-HTTP @Locked body', () => {
  let redis: SharedRedis;
  let probe: Redis;
  const pool = new ServicePool(() => redis.url);
  const apps: INestApplicationContext[] = [];

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    probe = redis.client();
  });
  beforeEach(() => {
    body = new Body();
    seen.skippedTicks = 0;
  });
  afterEach(async () => {
    body.finish();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await pool.closeAll();
  });
  afterAll(() => redis.stop());

  async function appWith(providers: Provider[], options: Partial<DistributedLockModuleOptions>): Promise<INestApplicationContext> {
    @Module({
      imports: [
        DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: PREFIX, ...options }),
        EventEmitterModule.forRoot(),
        ScheduleModule.forRoot(),
      ],
      providers,
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    apps.push(app);
    return app;
  }

  const redisKey = (key: string) => `${PREFIX}{${key}}`;

  /** Waits (bounded) until someone has taken a place in the queue of `key`. */
  async function untilQueued(key: string): Promise<void> {
    for (let i = 0; i < 200 && (await probe.llen(`${redisKey(key)}:q`)) === 0; i++) await sleep(5);
    expect(await probe.llen(`${redisKey(key)}:q`)).toBe(1);
  }

  it.each(KINDS)(
    '$name: its signal aborts with reason shutdown, the lease is renewed past its TTL, nobody enters before the body ends, the key is freed right after',
    async ({ key, providers, start }) => {
      const app = await appWith(providers, { ttl: TTL, shutdownTimeout: 10_000 });
      const service = app.get(LockService);
      const contender = await pool.make({ keyPrefix: PREFIX });

      const running = start(app);
      const lock = await body.entered;
      expect(await probe.get(redisKey(key))).toBe(lock.token);

      let contenderEnteredAt: number | undefined;
      const contending = contender.withLock(key, () => (contenderEnteredAt = performance.now()), { waitTimeout: 20_000 });
      await untilQueued(key);

      let closedAt: number | undefined;
      const closing = app.close().then(() => (closedAt = performance.now()));
      // Past the TTL: only renewals made during the drain can still keep the key ours.
      await sleep(TTL * 1.5);

      expect(await probe.get(redisKey(key))).toBe(lock.token);
      expect(contenderEnteredAt).toBeUndefined();
      expect(lock.isHeld()).toBe(true);
      expect(service.getStats().renewals).toBeGreaterThanOrEqual(2);
      expect(closedAt).toBeUndefined(); // close() waits for the body
      const reason = lock.signal.reason as LockLostError;
      expect(lock.signal.aborted).toBe(true);
      expect(reason).toBeInstanceOf(LockLostError);
      expect(reason.reason).toBe('shutdown');
      expect(reason.key).toBe(key);
      expect(reason.message).toMatch(/shutting down/);
      expect(reason.message).toMatch(/shutdownTimeout/);
      expect(reason.message).not.toMatch(/was lost/);

      // What a lapse would still take: the key must be free well before that.
      const pttlWhenBodyEnds = await probe.pttl(redisKey(key));
      expect(pttlWhenBodyEnds).toBeGreaterThan(TTL / 2);
      body.finish();
      await closing;
      await contending;

      expect(contenderEnteredAt).toBeGreaterThanOrEqual(body.endedAt!);
      expect(contenderEnteredAt! - body.endedAt!).toBeLessThan(pttlWhenBodyEnds);
      expect(closedAt).toBeGreaterThanOrEqual(body.endedAt!);
      expect(await probe.get(redisKey(key))).not.toBe(lock.token);
      expect(service.getStats()).toMatchObject({ released: 1, releaseFailures: 0, lost: 0 });
      // The body resolved normally to its caller (the method's result, the emitter's promise).
      await expect(running).resolves.toBeDefined();
      expect(lock.isHeld()).toBe(false);
    },
  );

  it('an @Interval job: the ticks the scheduler fires while the body runs are skipped (fail-fast), none runs after close', async () => {
    const app = await appWith([SettlementTicker], { ttl: TTL, shutdownTimeout: 10_000 });
    const lock = await body.entered;
    await sleep(100);
    expect(seen.skippedTicks).toBeGreaterThan(0);
    const closing = app.close();
    await sleep(50);
    const skippedAtClose = seen.skippedTicks;
    body.finish();
    await closing;
    await sleep(100);
    expect(seen.skippedTicks).toBe(skippedAtClose);
    expect(body.lock).toBe(lock); // one body ran, the first tick's
    expect(await probe.exists(redisKey('settle:tick'))).toBe(0);
  });

  it('while it drains, the body may still call a @Locked method on the key it holds (borrowed); a new key is LockServiceClosedError', async () => {
    const app = await appWith([Settlement], { ttl: TTL, shutdownTimeout: 10_000 });
    const running = app.get(Settlement).nesting();
    await body.entered;
    await app.close();
    await expect(running).resolves.toEqual(['ran under settle:nested', 'LockServiceClosedError']);
    expect(await probe.exists(redisKey('settle:nested'))).toBe(0);
    expect(await probe.exists(redisKey('settle:other'))).toBe(0);
  });

  it('a body that outlives shutdownTimeout keeps its key: close returns, renewals stop, the key is logged and lapses by TTL, never deleted', async () => {
    const SHUTDOWN_TIMEOUT = 400;
    const app = await appWith([Settlement], { ttl: TTL, shutdownTimeout: SHUTDOWN_TIMEOUT });
    const service = app.get(LockService);
    const logged: string[] = [];
    for (const level of ['error', 'warn'] as const) {
      jest.spyOn(service.engine.logger, level).mockImplementation((...args: unknown[]) => void logged.push(String(args[0])));
    }

    const running = app.get(Settlement).direct();
    const lock = await body.entered;
    const closeStarted = performance.now();
    await app.close();
    const closeTook = performance.now() - closeStarted;
    const pttlAfterClose = await probe.pttl(redisKey('settle:direct'));
    const checkedAt = performance.now();

    expect(closeTook).toBeGreaterThanOrEqual(SHUTDOWN_TIMEOUT - 5); // it waited for the body, bounded
    expect(closeTook).toBeLessThan(SHUTDOWN_TIMEOUT + 2_000);
    expect(await probe.get(redisKey('settle:direct'))).toBe(lock.token); // not deleted under the running body
    expect(pttlAfterClose).toBeGreaterThan(0);
    expect(logged.some((m) => m.includes('"settle:direct"') && /shutdownTimeout/.test(m))).toBe(true);
    const renewals = service.getStats().renewals;

    // Renewals stopped: the key lapses within the lease it had when close returned; it is there until then.
    let goneAt: number | undefined;
    while (goneAt === undefined && performance.now() - checkedAt < pttlAfterClose + TTL) {
      if ((await probe.get(redisKey('settle:direct'))) === null) goneAt = performance.now();
      else await sleep(10);
    }
    expect(goneAt).toBeDefined();
    expect(goneAt! - checkedAt).toBeGreaterThanOrEqual(pttlAfterClose - 50);
    expect(service.getStats().renewals).toBe(renewals);
    expect(body.endedAt).toBeUndefined(); // all of this while the body still ran

    body.finish();
    await expect(running).resolves.toBe('finished');
    expect(lock.isHeld()).toBe(false);
  });

  it('after close, a @Locked call is LockServiceClosedError and its method does not run', async () => {
    const app = await appWith([Settlement], { ttl: TTL });
    const settlement = app.get(Settlement);
    await app.close();
    apps.splice(apps.indexOf(app), 1);
    await expect(settlement.direct()).rejects.toBeInstanceOf(LockServiceClosedError);
    await expect(settlement.direct()).rejects.toThrow(/no new locks are taken/);
    expect(body.lock).toBeUndefined();
  });
});
