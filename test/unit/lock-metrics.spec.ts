import 'reflect-metadata';
import * as fs from 'fs';
import * as path from 'path';
import { Injectable } from '@nestjs/common';
import { SpanStatusCode } from '@opentelemetry/api';
import { Test } from '@nestjs/testing';
import {
  DistributedLockModule,
  LockBusyError,
  LockConnectionError,
  LockOptionsError,
  LockService,
  LockServiceClosedError,
  LockTimeoutError,
  Locked,
} from '../../lib';
import { INSTRUMENTATION_NAME } from '../../lib/observability/otel-lock-metrics';
import { OtelCapture } from '../harness/otel-capture';
import { RedisProcess } from '../harness/redis-process';
import { pingOnce } from '../harness/redis-ping';
import { redisSuite, sleep } from './core-helpers';

const ATTEMPTS = 'lock.acquire.attempts';
const WAIT = 'lock.wait.duration';
const HOLD = 'lock.hold.duration';
const VALIDATION = 'lock.release.validation_failures';
const LOST = 'lock.lost';
const RENEWALS = 'lock.renewals';
const RELEASE_ERRORS = 'lock.release.errors';

describe('lock metrics and spans through a real OpenTelemetry SDK', () => {
  const suite = redisSuite();
  let otel: OtelCapture;
  beforeEach(() => {
    otel = new OtelCapture();
    otel.install();
  });
  afterEach(() => otel.uninstall());

  it('meters under the package name', async () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { name: string };
    expect(INSTRUMENTATION_NAME).toBe(pkg.name);
    const locks = await suite.pool.make();
    await (await locks.acquire('scope:1', { name: 'scope' })).release();
    expect(await otel.meterNames()).toEqual([pkg.name]);
  });

  it('an uncontended acquire: acquired, waited=false, one wait and one hold sample, a span with the fencing token', async () => {
    const locks = await suite.pool.make();
    const lock = await locks.acquire('order:42', { name: 'order' });
    await sleep(200);
    expect(await lock.release()).toBe(true);

    expect(await otel.find(ATTEMPTS)).toEqual([
      expect.objectContaining({ attributes: { 'lock.name': 'order', 'lock.outcome': 'acquired', 'lock.waited': false }, value: 1 }),
    ]);
    const [wait] = await otel.find(WAIT, { 'lock.name': 'order', 'lock.outcome': 'acquired' });
    expect(wait.value).toBe(1);
    const [hold] = await otel.find(HOLD, { 'lock.name': 'order' });
    expect(hold.value).toBe(1);
    expect(hold.sum).toBeGreaterThanOrEqual(0.199);
    expect(wait.sum).toBeLessThan(hold.sum!); // the round trip of one attempt, not the hold

    const [span] = otel.finishedSpans('lock.acquire');
    expect(span.attributes).toMatchObject({
      'lock.name': 'order',
      'lock.outcome': 'acquired',
      'lock.waited': false,
      'lock.attempts': 1,
      'lock.fencing_token': lock.fencingToken,
    });
    expect(span.status.code).not.toBe(SpanStatusCode.ERROR);
  });

  it('an acquire that waited for a holder: waited=true and a wait as long as the rest of the hold', async () => {
    const locks = await suite.pool.make();
    const other = await suite.pool.make();
    const holder = await locks.acquire('order:7', { name: 'holder' });
    const heldFrom = performance.now();
    const waiting = other.acquire('order:7', { name: 'waiter', waitTimeout: 5_000 });
    await sleep(300);
    const heldMs = performance.now() - heldFrom;
    const releasedAt = performance.now();
    await holder.release();
    const waiter = await waiting;
    const handedOverMs = performance.now() - releasedAt;
    await waiter.release();

    expect(await otel.total(ATTEMPTS, { 'lock.name': 'waiter', 'lock.outcome': 'acquired', 'lock.waited': true })).toBe(1);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'waiter', 'lock.waited': false })).toBe(0);
    const [wait] = await otel.find(WAIT, { 'lock.name': 'waiter' });
    const [hold] = await otel.find(HOLD, { 'lock.name': 'holder' });
    // The waiter started just after the holder got the key and entered just after it let go.
    expect(hold.sum! * 1000).toBeGreaterThanOrEqual(heldMs - 1);
    expect(wait.sum!).toBeGreaterThan(0.29);
    // Longer than the hold by at most the handover itself, as measured here (a fixed 50 ms was less than a
    // loaded machine's stall between the release and the waiter's entry).
    expect(wait.sum!).toBeLessThanOrEqual(hold.sum! + handedOverMs / 1000 + 0.005);
    const span = otel.finishedSpans('lock.acquire').find((s) => s.attributes['lock.name'] === 'waiter')!;
    expect(span.attributes['lock.waited']).toBe(true);
    expect(span.attributes['lock.attempts']).toBeGreaterThanOrEqual(1);
    expect(span.attributes['lock.fencing_token']).toBe(waiter.fencingToken);
    const spanMs = (span.duration[0] * 1e9 + span.duration[1]) / 1e6;
    expect(spanMs).toBeGreaterThan(290);
  });

  it('busy: onBusy throw, fail-fast and tryAcquire each count one busy attempt that did not wait', async () => {
    const locks = await suite.pool.make();
    const other = await suite.pool.make();
    const holder = await locks.acquire('sku:1', { name: 'sku' });
    await expect(other.acquire('sku:1', { name: 'sku', onBusy: 'throw' })).rejects.toBeInstanceOf(LockBusyError);
    expect(await other.withLock('sku:1', () => 'ran', { name: 'sku', onBusy: 'fail-fast', fallback: 'skipped' })).toBe('skipped');
    expect(await other.tryAcquire('sku:1', { name: 'sku' })).toBeNull();
    await holder.release();

    expect(await otel.total(ATTEMPTS, { 'lock.name': 'sku', 'lock.outcome': 'busy', 'lock.waited': false })).toBe(3);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'sku', 'lock.outcome': 'acquired' })).toBe(1);
    expect(await otel.total(HOLD, { 'lock.name': 'sku' })).toBe(1); // a busy call held nothing
  });

  it('timeout: waited=true, a wait of about waitTimeout, an error span', async () => {
    const locks = await suite.pool.make();
    const other = await suite.pool.make();
    const holder = await locks.acquire('slot:1', { name: 'slot' });
    await expect(other.acquire('slot:1', { name: 'slot', waitTimeout: 150 })).rejects.toBeInstanceOf(LockTimeoutError);
    await holder.release();

    expect(await otel.total(ATTEMPTS, { 'lock.name': 'slot', 'lock.outcome': 'timeout', 'lock.waited': true })).toBe(1);
    const [wait] = await otel.find(WAIT, { 'lock.name': 'slot', 'lock.outcome': 'timeout' });
    expect(wait.sum!).toBeGreaterThanOrEqual(0.149);
    const span = otel.finishedSpans('lock.acquire').find((s) => s.attributes['lock.outcome'] === 'timeout')!;
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes['lock.fencing_token']).toBeUndefined();
  });

  it("aborted: the call's signal ended its wait; counted apart from timeouts and errors, not an error span", async () => {
    const locks = await suite.pool.make();
    const other = await suite.pool.make();
    const holder = await locks.acquire('desk:1', { name: 'desk' });
    const controller = new AbortController();
    const waiting = other.acquire('desk:1', { name: 'desk', waitTimeout: 10_000, signal: controller.signal });
    await sleep(50);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    await holder.release();

    expect(await otel.total(ATTEMPTS, { 'lock.name': 'desk', 'lock.outcome': 'aborted', 'lock.waited': true })).toBe(1);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'desk', 'lock.outcome': 'error' })).toBe(0);
    const span = otel.finishedSpans('lock.acquire').find((s) => s.attributes['lock.outcome'] === 'aborted')!;
    expect(span.status.code).not.toBe(SpanStatusCode.ERROR);
  });

  it('error: with Redis stopped an acquire counts outcome error (never busy)', async () => {
    const own = await RedisProcess.start();
    const locks = new LockService({ redis: own.url, keyPrefix: 'test:', commandTimeout: 300 });
    try {
      await locks.onModuleInit();
      await (await locks.acquire('pay:1', { name: 'pay' })).release();
      await own.stop();
      await expect(locks.acquire('pay:1', { name: 'pay', waitTimeout: 200 })).rejects.toBeInstanceOf(LockConnectionError);
    } finally {
      await locks.close();
      await own.stop();
    }
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'pay', 'lock.outcome': 'error' })).toBe(1);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'pay', 'lock.outcome': 'busy' })).toBe(0);
    expect(otel.finishedSpans('lock.acquire').filter((s) => s.status.code === SpanStatusCode.ERROR)).toHaveLength(1);
  });

  it('a critical section that outran its TTL: lost (expired) at the deadline, then a release validation failure', async () => {
    const locks = await suite.pool.make();
    const lock = await locks.acquire('job:1', { name: 'job', ttl: 250, watchdog: false });
    await sleep(600);
    expect(await lock.release()).toBe(false);

    expect(await otel.total(VALIDATION, { 'lock.name': 'job' })).toBe(1);
    expect(await otel.total(LOST, { 'lock.name': 'job', 'lock.lost.reason': 'expired' })).toBe(1);
    expect(await otel.total(RENEWALS)).toBe(0);
    // A release that found its lease is not a validation failure.
    await (await locks.acquire('job:2', { name: 'job' })).release();
    expect(await otel.total(VALIDATION)).toBe(1);
  });

  it('renewals: the watchdog counts renewed leases; a key taken away is a lost renewal and a not-owner loss', async () => {
    const locks = await suite.pool.make();
    const lock = await locks.acquire('feed:1', { name: 'feed', ttl: 300 });
    await sleep(800); // a renewal every ttl/3: about 8
    const renewed = await otel.total(RENEWALS, { 'lock.name': 'feed', 'lock.outcome': 'renewed' });
    expect(renewed).toBeGreaterThanOrEqual(3);
    expect(renewed).toBe(locks.getStats().renewals);
    await suite.client.del(locks.engine.store.keysFor('feed:1').lock);
    await new Promise<void>((resolve) => lock.signal.addEventListener('abort', () => resolve(), { once: true }));
    expect(await otel.total(RENEWALS, { 'lock.name': 'feed', 'lock.outcome': 'lost' })).toBe(1);
    expect(await otel.total(LOST, { 'lock.name': 'feed', 'lock.lost.reason': 'not-owner' })).toBe(1);
    expect(await lock.release()).toBe(false);
    // Reported when the renewal found it: the release that follows does not count it again.
    expect(await otel.total(LOST, { 'lock.name': 'feed' })).toBe(1);
  });

  it('a key Redis lost under a holder (FLUSHALL, as a restart without persistence): release() counts a not-owner loss, once', async () => {
    const own = await RedisProcess.start();
    const admin = own.client();
    const locks = new LockService({ redis: own.url, keyPrefix: 'test:' });
    try {
      await locks.onModuleInit();
      const lock = await locks.acquire('invoice:1', { name: 'invoice' });
      await admin.flushall();
      // The fault happened: the key is free for someone else while the first holder still runs.
      const other = await locks.acquire('invoice:1', { name: 'other' });
      expect(await lock.release()).toBe(false);
      expect(await lock.release()).toBe(false);
      await other.release();
    } finally {
      await locks.close();
      admin.disconnect();
      await own.stop();
    }
    expect(await otel.total(VALIDATION, { 'lock.name': 'invoice' })).toBe(1);
    expect(await otel.find(LOST, { 'lock.name': 'invoice' })).toEqual([
      expect.objectContaining({ attributes: { 'lock.name': 'invoice', 'lock.lost.reason': 'not-owner' }, value: 1 }),
    ]);
    expect(locks.getStats().lost).toBe(1);
  });

  it('a release() that fails because Redis is frozen counts lock.release.errors (the key stays taken until its TTL)', async () => {
    const own = await RedisProcess.start();
    const locks = new LockService({ redis: own.url, keyPrefix: 'test:', commandTimeout: 300 });
    try {
      await locks.onModuleInit();
      const lock = await locks.acquire('report', { name: 'report' });
      own.pause();
      expect(await pingOnce(own.port, undefined, 200)).toBe(false); // the fault happened: Redis does not answer
      await expect(lock.release()).rejects.toBeInstanceOf(LockConnectionError);
    } finally {
      own.resume();
      await locks.close();
      await own.stop();
    }
    expect(await otel.total(RELEASE_ERRORS, { 'lock.name': 'report' })).toBe(1);
    expect(await otel.total(VALIDATION)).toBe(0);
  });

  it('closed: waiters ended by close() and calls after it count outcome closed, not error, and no error span', async () => {
    const holder = await suite.pool.make();
    const leaving = await suite.pool.make();
    const held = await holder.acquire('cart:9', { name: 'holder' });
    const waits = [1, 2].map(() => leaving.acquire('cart:9', { name: 'cart', waitTimeout: 10_000 }));
    await sleep(100);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'cart' })).toBe(0); // still waiting
    await leaving.close();
    for (const wait of waits) await expect(wait).rejects.toBeInstanceOf(LockServiceClosedError);
    await expect(leaving.acquire('cart:9', { name: 'cart' })).rejects.toBeInstanceOf(LockServiceClosedError);
    await held.release();

    expect(await otel.total(ATTEMPTS, { 'lock.name': 'cart', 'lock.outcome': 'closed', 'lock.waited': true })).toBe(2);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'cart', 'lock.outcome': 'closed', 'lock.waited': false })).toBe(1);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'cart', 'lock.outcome': 'error' })).toBe(0);
    const spans = otel.finishedSpans('lock.acquire').filter((s) => s.attributes['lock.name'] === 'cart');
    expect(spans.map((s) => s.attributes['lock.outcome'])).toEqual(['closed', 'closed', 'closed']);
    expect(spans.filter((s) => s.status.code === SpanStatusCode.ERROR)).toEqual([]);
  });

  it("@Locked reports its key template as lock.name, never a resolved key; acquire() without a name reports 'manual'", async () => {
    @Injectable()
    class Orders {
      @Locked('order:<0>')
      async pay(orderId: string): Promise<string> {
        return Promise.resolve(orderId);
      }

      @Locked(['order:<0>', 'stock:<1>'], { name: 'order-and-stock' })
      async ship(orderId: string, sku: string): Promise<string> {
        return Promise.resolve(`${orderId}/${sku}`);
      }
    }
    const app = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ redis: suite.redis.url, keyPrefix: 'test:' })],
      providers: [Orders],
    }).compile();
    await app.init();
    try {
      const orders = app.get(Orders);
      await Promise.all(['4711', '4712', '4713'].map((id) => orders.pay(id)));
      await orders.ship('4711', 'sku-99');
      await (await app.get(LockService).acquire('order:4714')).release();
    } finally {
      await app.close();
    }
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'order:<0>', 'lock.outcome': 'acquired' })).toBe(3);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'order-and-stock' })).toBe(1);
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'manual' })).toBe(1);
    const names = new Set((await otel.points()).map((p) => p.attributes['lock.name']));
    expect([...names].sort()).toEqual(['manual', 'order-and-stock', 'order:<0>']);
    // Text attributes only: a number (a wait duration, a fencing token) may contain these digits by chance.
    for (const s of otel.spans.getFinishedSpans()) {
      const texts = Object.values(s.attributes).filter((value) => typeof value === 'string');
      expect(texts.length).toBeGreaterThan(0);
      expect(JSON.stringify(texts)).not.toMatch(/471[1-4]|sku-99/);
    }
  });

  it('a MeterProvider registered after the LockService was created is the one recorded to', async () => {
    const locks = await suite.pool.make();
    await (await locks.acquire('late:1', { name: 'late' })).release();
    expect(await otel.total(ATTEMPTS, { 'lock.name': 'late' })).toBe(1);
    // The global meter API has no proxy: an instrument made from the first provider would never reach the second.
    const later = new OtelCapture();
    later.install();
    try {
      await (await locks.acquire('late:1', { name: 'late' })).release();
      expect(await later.total(ATTEMPTS, { 'lock.name': 'late' })).toBe(1);
      expect(later.finishedSpans('lock.acquire')).toHaveLength(1);
      expect(await otel.total(ATTEMPTS, { 'lock.name': 'late' })).toBe(1);
    } finally {
      await later.uninstall();
    }
  });

  it('name is validated like every option, and is not a module-wide default', async () => {
    const locks = await suite.pool.make();
    await expect(locks.acquire('x', { name: '' })).rejects.toBeInstanceOf(LockOptionsError);
    await expect(locks.acquire('x', { name: 'k'.repeat(201) })).rejects.toThrow(/at most 200 characters/);
    expect(() => new LockService({ redis: suite.redis.url, name: 'everything' } as never)).toThrow(/not a module-wide option/);
  });
});

describe('without @opentelemetry/api', () => {
  const suite = redisSuite();

  it('the library loads and locks, tries the require once, and records nothing', async () => {
    const otel = new OtelCapture();
    otel.install(); // a real SDK in the process: the library must not reach it without the API module
    let requires = 0;
    try {
      let isolated!: { lib: typeof import('../../lib'); metrics: typeof import('../../lib/observability/lock-metrics') };
      jest.isolateModules(() => {
        jest.doMock('@opentelemetry/api', () => {
          requires++;
          throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), { code: 'MODULE_NOT_FOUND' });
        });
        // A fresh copy of the library in this registry, where @opentelemetry/api cannot be loaded.
        /* eslint-disable @typescript-eslint/no-require-imports */
        isolated = { lib: require('../../lib') as typeof import('../../lib'), metrics: require('../../lib/observability/lock-metrics') as never };
        /* eslint-enable @typescript-eslint/no-require-imports */
      });
      expect(requires).toBe(0); // importing the library does not touch it
      const services = [0, 1].map(() => new isolated.lib.LockService({ redis: suite.redis.url, keyPrefix: 'test:' }));
      try {
        for (const s of services) {
          await s.onModuleInit();
          expect(s.engine.metrics).toBe(isolated.metrics.NO_LOCK_METRICS);
          const lock = await s.acquire('plain:1', { name: 'plain' });
          expect(await lock.release()).toBe(true);
        }
        await expect(services[0].withLock('plain:2', () => 'done')).resolves.toBe('done');
      } finally {
        await Promise.all(services.map((s) => s.close()));
      }
      expect(requires).toBe(1);
      expect(await otel.points()).toEqual([]);
      expect(otel.spans.getFinishedSpans()).toEqual([]);
    } finally {
      jest.dontMock('@opentelemetry/api');
      await otel.uninstall();
    }
  });
});
