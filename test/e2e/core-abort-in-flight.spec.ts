/**
 * LockOptions.signal against a Redis call already on the wire: Redis frozen (SIGSTOP) or slow (TCP proxy delay)
 * during the first attempt, a retry while waiting, or the confirmation of a handed-over lock. The call must reject
 * with the signal's reason at the abort, not a commandTimeout later, and whatever the call still does in Redis must
 * be taken back owner-checked: no key held by nobody's handle until its TTL, no place left in the queue, the
 * watchdog tracking nothing, the acquisition counted once as `aborted`, close() waiting for nothing, no unhandled
 * rejection when the late reply (a grant, or the bound's error) arrives.
 *
 * Each case proves its fault: a frozen server answers no raw PING; a delayed call is seen sent (a spy on the store)
 * and the attempt's effect is seen in Redis afterwards (the key's fencing token written by its grant).
 */
import { getEventListeners } from 'node:events';
import { DistributedLockModuleOptions, LockConnectionError, LockService } from '../../lib';
import { pingOnce } from '../harness/redis-ping';
import { TcpProxy } from '../harness/tcp-proxy';
import { faultSuite, startService } from './workers/support/fault-helpers';
import { acquireOutcomesOf } from './workers/support/acquire-outcomes';
import { grantedAndGivenBack, lockKeyState } from './workers/support/lock-key-state';
import { hrMs, isAlive, pollUntil, sleep, timed } from './workers/support/timing';

const PREFIX = 'ta:';
/** Far above every bound below: an abort honoured only when the call times out fails each case by seconds. */
const COMMAND_TIMEOUT = 3_000;
const TTL = 10_000;
const SHUTDOWN_TIMEOUT = 1_000;
/** The call is on the wire this long when its caller gives up. */
const ABORT_AFTER = 50;
/** From the abort to the call's rejection: a few ms of callbacks, plus the time this process was measured stalled. */
const AT_ONCE = 20;
/** Proxy delay per direction: an attempt answered after 2 × DELAY. */
const DELAY = 250;
/** Scheduling around a bounded call. */
const SLACK = 100;

describe('an abort while a Redis call of the acquisition is on the wire', () => {
  let proxy: TcpProxy;
  const suite = faultSuite({
    heal: ({ redis }) => {
      redis.resume();
      proxy.setDelay(0);
    },
    closeWithinMs: SHUTDOWN_TIMEOUT + SLACK,
  });

  beforeAll(async () => {
    proxy = await TcpProxy.start(suite.redis.port);
  });
  afterAll(() => proxy.stop());

  const makeService = (options: Partial<DistributedLockModuleOptions> = {}): Promise<LockService> =>
    startService(suite.services, {
      redis: suite.redis.url,
      keyPrefix: PREFIX,
      commandTimeout: COMMAND_TIMEOUT,
      ttl: TTL,
      shutdownTimeout: SHUTDOWN_TIMEOUT,
      ...options,
    });

  const stateOf = (key: string) => lockKeyState(suite.client, PREFIX, key);
  const givenBack = async (key: string): Promise<boolean> => grantedAndGivenBack(await stateOf(key));

  async function expectFrozen(): Promise<void> {
    expect(await pingOnce(suite.redis.port, suite.redis.host, 150)).toBe(false);
    expect(isAlive(suite.redis.pid)).toBe(true);
  }

  /**
   * Starts `call` with a signal, aborts it with a reason of its own once `whenOnWire` resolves (default: ABORT_AFTER
   * ms), and reports how the call ended and how long after the abort.
   */
  async function abortMidCall(label: string, call: (signal: AbortSignal) => Promise<unknown>, whenOnWire?: () => Promise<unknown>) {
    const controller = new AbortController();
    const reason = new Error(`${label}: the caller gave up`);
    const settled = timed(suite.calls.track(label, call(controller.signal)));
    await (whenOnWire ? whenOnWire() : sleep(ABORT_AFTER));
    const abortedAt = performance.now();
    const abortedAtHr = hrMs();
    controller.abort(reason);
    const outcome = await settled;
    const afterAbortMs = outcome.settledPerf - abortedAt;
    console.log(`${label}: rejected ${afterAbortMs.toFixed(1)} ms after the abort (commandTimeout ${COMMAND_TIMEOUT} ms)`);
    return { signal: controller.signal, reason, outcome, afterAbortMs, abortedAt, abortedAtHr };
  }

  /** Rejected with the signal's reason, within AT_ONCE of the abort (commandTimeout is far larger). */
  function expectEndedAtAbort(result: Awaited<ReturnType<typeof abortMidCall>>): void {
    expect(result.outcome.value).toBeUndefined();
    expect(result.outcome.error).toBe(result.reason);
    expect(result.afterAbortMs).toBeLessThan(AT_ONCE + suite.lateness.stalledMs(result.abortedAt, result.outcome.settledPerf));
    expect(COMMAND_TIMEOUT).toBeGreaterThan(50 * AT_ONCE);
    // Its abort listener fired and is gone: nothing of the library stays on the caller's signal.
    expect(getEventListeners(result.signal, 'abort')).toHaveLength(0);
  }

  /** The store's calls of `method`, counted as they are sent. */
  function sendsOf(service: LockService, method: 'acquire' | 'extend'): { count: number } {
    const sent = { count: 0 };
    const store = service.engine.store;
    const original = store[method].bind(store) as (...args: unknown[]) => Promise<unknown>;
    jest.spyOn(store, method).mockImplementation(((...args: unknown[]) => {
      sent.count++;
      return original(...args);
    }) as never);
    return sent;
  }

  it('1a: Redis frozen during the first attempt on a free key: rejects at the abort; after the thaw the grant is given back', async () => {
    const locks = await makeService();
    const outcomes = acquireOutcomesOf(locks);
    suite.redis.pause();
    await expectFrozen();

    const result = await abortMidCall('acquire on a frozen Redis', (signal) => locks.acquire('f1', { signal }));
    expectEndedAtAbort(result);
    // Nothing was adopted or tracked, and the drain does not wait for the attempt still on the wire.
    expect(locks.engine.watchdog.health(performance.now()).leases).toBe(0);
    const drained = await timed(() => locks.engine.drainLocks());
    expect(drained.ms).toBeLessThan(AT_ONCE + suite.lateness.stalledMs(drained.startedPerf, drained.settledPerf));

    suite.redis.resume();
    // The attempt ran after the thaw (it wrote the key's fencing token) and the owner-checked give-back sent behind
    // it on the same connection deleted the lock: the key is free, long before its TTL.
    expect(await pollUntil(() => givenBack('f1'), 1_000)).toBe(true);
    const other = await makeService();
    const lock = await other.tryAcquire('f1');
    expect(lock).not.toBeNull();
    expect(await lock!.release()).toBe(true);
    // Its late grant changed nothing: counted once, as aborted, never as a connection error or a lock.
    expect(outcomes).toEqual(['aborted']);
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
    expect(locks.engine.watchdog.health(performance.now()).leases).toBe(0);
  });

  it('1b: Redis frozen during the first attempt on a held key: rejects at the abort; after the thaw no place is left in the queue', async () => {
    const holder = await makeService();
    const held = await holder.acquire('f2');
    const locks = await makeService();
    suite.redis.pause();
    await expectFrozen();

    const result = await abortMidCall('queued acquire on a frozen Redis', (signal) =>
      locks.acquire('f2', { signal, onBusy: 'retry', waitTimeout: 20_000 }),
    );
    expectEndedAtAbort(result);

    suite.redis.resume();
    // The attempt queued the caller after the thaw, and the give-back behind it left the queue again...
    expect(await pollUntil(async () => (await stateOf('f2')).queue === 0, 1_000)).toBe(true);
    // ...so the release frees the key rather than handing it to a caller that is gone.
    expect(await held.release()).toBe(true);
    expect(await stateOf('f2')).toMatchObject({ owner: null, queue: 0 });
  });

  it('1c: frozen past commandTimeout after the abort: the late LockConnectionError goes nowhere, and the key is still given back', async () => {
    const SHORT_TIMEOUT = 400;
    const locks = await makeService({ commandTimeout: SHORT_TIMEOUT });
    const outcomes = acquireOutcomesOf(locks);
    suite.redis.pause();
    await expectFrozen();

    const result = await abortMidCall('acquire frozen past its bound', (signal) => locks.acquire('f3', { signal }));
    expectEndedAtAbort(result);
    // The attempt's own bound expires while Redis is still frozen: that rejection must not surface (the suite
    // fails on any unhandled rejection) nor be counted.
    await sleep(SHORT_TIMEOUT + SLACK);
    await expectFrozen();
    suite.redis.resume();
    expect(await pollUntil(() => givenBack('f3'), 1_000)).toBe(true);
    expect(outcomes).toEqual(['aborted']);
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
  });

  it('2: an attempt delayed on the way that succeeds after the abort: rejects at the abort, the key is free at once, close() waits for nothing', async () => {
    const locks = await makeService({ redis: proxy.url });
    const outcomes = acquireOutcomesOf(locks);
    proxy.setDelay(DELAY);

    const result = await abortMidCall('acquire over a slow link', (signal) => locks.acquire('s1', { signal }));
    expectEndedAtAbort(result);
    // Shut the service down right away: nothing is left to wait for, and the give-back was written before the QUIT.
    const drained = await timed(() => locks.engine.drainLocks());
    expect(drained.ms).toBeLessThan(AT_ONCE + suite.lateness.stalledMs(drained.startedPerf, drained.settledPerf));
    const closing = timed(() => locks.close());

    // The attempt reaches Redis DELAY after it was sent and takes the key; the give-back right behind it frees it.
    const freed = await pollUntil(() => givenBack('s1'), 4 * DELAY, 2);
    const freedAfterMs = hrMs() - result.abortedAtHr;
    console.log(`2: key given back ${freedAfterMs.toFixed(0)} ms after the abort (proxy delay ${DELAY} ms each way, TTL ${TTL} ms)`);
    expect(freed).toBe(true);
    expect(freedAfterMs).toBeLessThan(4 * DELAY + suite.lateness.stalledMs(result.abortedAt, performance.now()));

    const closed = await closing;
    expect(closed.error).toBeUndefined();
    // Only the QUIT's own round trip over the slow link, behind the attempt and the give-back.
    expect(closed.ms).toBeLessThan(2 * DELAY + 2 * SLACK + suite.lateness.stalledMs(closed.startedPerf, closed.settledPerf));

    const other = await makeService();
    const lock = await other.tryAcquire('s1');
    expect(lock).not.toBeNull();
    await lock!.release();
    expect(outcomes).toEqual(['aborted']);
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
  });

  it('2b: an attempt Redis runs only after the first give-back (sent again after NOSCRIPT) is given back once it settles', async () => {
    const locks = await makeService({ redis: proxy.url });
    // The acquire script is cached on this connection (later calls go by SHA1), the abandon script not yet.
    await (await locks.acquire('n0')).release();
    // The fault: the server loses its script cache (SCRIPT FLUSH, as after a failover or by an operator).
    expect(await suite.client.script('FLUSH')).toBe('OK');
    proxy.setDelay(DELAY);

    const result = await abortMidCall('acquire answered NOSCRIPT', (signal) => locks.acquire('n1', { signal }));
    expectEndedAtAbort(result);
    // The attempt's EVALSHA is refused (NOSCRIPT), the give-back sent at the abort (EVAL, its first use) runs and finds
    // nothing, and only then is the attempt sent again as EVAL: it takes the key after the first give-back...
    expect(await pollUntil(async () => (await stateOf('n1')).owner !== null, 6 * DELAY, 2)).toBe(true);
    // ...and the give-back sent once it has settled frees it, long before its TTL.
    expect(await pollUntil(() => givenBack('n1'), 4 * DELAY)).toBe(true);
    console.log(`2b: key given back ${(hrMs() - result.abortedAtHr).toFixed(0)} ms after the abort (TTL ${TTL} ms)`);
  });

  it('3a: waiting, a retry on the way when the abort comes, handed the lock before it lands: rejects at the abort, the handed lock is freed', async () => {
    const holder = await makeService();
    const held = await holder.acquire('w1');
    // A short waiter lease: the waiter refreshes its place (a retry) every 400-500 ms.
    const locks = await makeService({ redis: proxy.url, waiterLease: 1_500 });
    const attempts = sendsOf(locks, 'acquire');
    const result = await abortMidCall(
      'retry over a slow link',
      (signal) => locks.acquire('w1', { signal, waitTimeout: 20_000 }),
      async () => {
        // Queued and subscribed (the first wait subscribes, then asks again at once), then pausing.
        expect(await pollUntil(() => attempts.count >= 2 && locks.engine.health().wakeChannel === 'subscribed', 2_000)).toBe(true);
        await sleep(20);
        proxy.setDelay(DELAY);
        const before = attempts.count;
        // The next refresh is sent, and the proxy holds it.
        expect(await pollUntil(() => attempts.count > before, 2_000, 1)).toBe(true);
      },
    );
    expectEndedAtAbort(result);
    // The holder lets go while the retry is still on its way: the release hands the key to the waiter (the head of
    // the queue), the retry then finds it its own, and the give-back behind the retry frees it.
    const fenceBefore = held.fencingToken;
    expect(await held.release()).toBe(true);
    const freed = await pollUntil(() => givenBack('w1'), 4 * DELAY);
    const freedAfterMs = hrMs() - result.abortedAtHr;
    console.log(`3a: handed key given back ${freedAfterMs.toFixed(0)} ms after the abort (TTL ${TTL} ms)`);
    expect(freed).toBe(true);
    // It was handed over (a new fencing token), then given back: not left to lapse.
    expect(Number((await stateOf('w1')).fence)).toBeGreaterThan(fenceBefore);
    const other = await makeService();
    const lock = await other.tryAcquire('w1');
    expect(lock).not.toBeNull();
    await lock!.release();
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
    expect(locks.engine.watchdog.health(performance.now()).leases).toBe(0);
  });

  it("3b: waiting with the watchdog off, the handed lock's confirmation on the way when the abort comes: rejects at the abort, the lock is freed", async () => {
    const holder = await makeService();
    const held = await holder.acquire('w2');
    // A long waiter lease: no refresh of the waiter's place comes in between.
    const locks = await makeService({ redis: proxy.url, waiterLease: 6_000 });
    const attempts = sendsOf(locks, 'acquire');
    const extends_ = sendsOf(locks, 'extend');
    const result = await abortMidCall(
      'handover confirmation over a slow link',
      (signal) => locks.acquire('w2', { signal, waitTimeout: 20_000, watchdog: false }),
      async () => {
        expect(await pollUntil(() => attempts.count >= 2 && locks.engine.health().wakeChannel === 'subscribed', 2_000)).toBe(true);
        await sleep(20);
        proxy.setDelay(DELAY);
        // The release hands the key over; the waiter hears it (late, over the slow link) and extends the handed
        // lease to its ttl before using it (the watchdog is off): that call is on its way at the abort.
        expect(await held.release()).toBe(true);
        expect(await pollUntil(() => extends_.count > 0, 4 * DELAY, 1)).toBe(true);
      },
    );
    expectEndedAtAbort(result);
    expect(attempts.count).toBe(2);
    // The extension lands (the handed lock is the waiter's: it now has its full ttl) and the give-back behind it frees it.
    expect(await pollUntil(() => givenBack('w2'), 4 * DELAY)).toBe(true);
    const other = await makeService();
    const lock = await other.tryAcquire('w2');
    expect(lock).not.toBeNull();
    await lock!.release();
  });

  it('5a (control): an attempt answered before the abort keeps its lock, and leaves no listener on the signal', async () => {
    const locks = await makeService({ redis: proxy.url });
    proxy.setDelay(DELAY);
    const controller = new AbortController();
    const lock = await suite.calls.track('acquire answered in time', locks.acquire('c1', { signal: controller.signal }));
    controller.abort();
    proxy.setDelay(0);
    await sleep(20);
    expect(lock.isHeld()).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect((await stateOf('c1')).owner).toBe(lock.token);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect(await lock.release()).toBe(true);
  });

  it('5b: a waiter given the lock after a pause in the queue leaves no listener on its signal', async () => {
    const holder = await makeService();
    const held = await holder.acquire('c2');
    const locks = await makeService();
    const attempts = sendsOf(locks, 'acquire');
    const controller = new AbortController();
    const waiting = suite.calls.track('waiter', locks.acquire('c2', { signal: controller.signal, waitTimeout: 20_000 }));
    // Queued and subscribed, then pausing (its pause listens to the signal).
    expect(await pollUntil(() => attempts.count >= 2 && locks.engine.health().wakeChannel === 'subscribed', 2_000)).toBe(true);
    expect(await pollUntil(() => getEventListeners(controller.signal, 'abort').length > 0, 1_000)).toBe(true);
    await held.release();
    const lock = await waiting;
    expect(lock.isHeld()).toBe(true);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await lock.release();
  });

  it('5c (control): without a signal, a slow attempt is waited for and a frozen Redis ends the call at commandTimeout', async () => {
    const slow = await makeService({ redis: proxy.url });
    proxy.setDelay(DELAY);
    const granted = await timed(() => suite.calls.track('acquire without a signal', slow.acquire('c3')));
    expect(granted.error).toBeUndefined();
    expect(granted.ms).toBeGreaterThanOrEqual(2 * DELAY - 5);
    await granted.value!.release();

    const SHORT_TIMEOUT = 300;
    const locks = await makeService({ commandTimeout: SHORT_TIMEOUT });
    suite.redis.pause();
    await expectFrozen();
    const frozen = await timed(() => suite.calls.track('acquire without a signal, frozen', locks.acquire('c4')));
    expect(frozen.error).toBeInstanceOf(LockConnectionError);
    expect(frozen.ms).toBeGreaterThanOrEqual(SHORT_TIMEOUT - 5);
    expect(frozen.ms).toBeLessThan(suite.lateness.boundFor(frozen, SHORT_TIMEOUT, SLACK));
  });
});
