/**
 * T4 — Redis frozen (SIGSTOP), killed (SIGKILL) and restarted empty, with the library in the
 * middle of acquire, hold (watchdog renewals) and release. Every call must settle within its
 * configured bound with LockConnectionError (never "busy", never a hang), a held lock must be
 * reported lost through its signal, nothing may be left pending, no promise may reject unhandled,
 * and the service must still close cleanly.
 *
 * Each case first proves the fault fired: a frozen or dead server does not answer a raw PING, a
 * killed server's pid is gone.
 */
import { DistributedLockModuleOptions, LockConnectionError, LockHandle, LockLostError, LockService } from '../../lib';
import { pingOnce } from '../harness/redis-ping';
import { acquireUntilBack, startService, faultSuite } from './workers/support/fault-helpers';
import { abortOf, hrMs, isAlive, pollUntil, sleep, sleepUntil, timed } from './workers/support/timing';

const COMMAND_TIMEOUT = 300;
/**
 * Scheduling around a bounded call (round trips, callbacks); the bounds below are bound + this + the time
 * this process was measured stalled meanwhile (suite.lateness.boundFor: a loaded CI machine fired a timer
 * 246 ms late, more than this slack alone).
 */
const SLACK = 100;
const SHUTDOWN_TIMEOUT = 1_000;

describe('T4 Redis stopped, frozen and restarted under the lock', () => {
  const suite = faultSuite({
    // Whatever a case did to the server, the next one starts with a running, responsive Redis.
    heal: async ({ redis }) => {
      try {
        redis.resume();
      } catch {
        // killed (and not restarted) by the case
      }
      if (!(await pingOnce(redis.port, redis.host, 200))) await redis.restart();
    },
    // Every service closes cleanly and promptly, and no library call is left hanging.
    closeWithinMs: SHUTDOWN_TIMEOUT + SLACK,
  });

  const makeService = (options: Partial<DistributedLockModuleOptions> = {}): Promise<LockService> =>
    startService(suite.services, {
      redis: suite.redis.url,
      keyPrefix: 't4:',
      commandTimeout: COMMAND_TIMEOUT,
      shutdownTimeout: SHUTDOWN_TIMEOUT,
      ...options,
    });

  async function expectFrozen(): Promise<void> {
    expect(await pingOnce(suite.redis.port, suite.redis.host, 150)).toBe(false);
    expect(isAlive(suite.redis.pid)).toBe(true);
  }

  it('(a) Redis frozen during acquire: LockConnectionError within commandTimeout, and the attempt leaves nothing behind', async () => {
    const locks = await makeService({ ttl: 2_000 });
    suite.redis.pause();
    await expectFrozen();

    const attempt = await timed(() => suite.calls.track('acquire', locks.acquire('a:key')));
    console.log(`T4 (a) acquire on a frozen Redis settled after ${attempt.ms.toFixed(1)} ms: ${(attempt.error as Error)?.name}`);
    expect(attempt.error).toBeInstanceOf(LockConnectionError);
    expect((attempt.error as LockConnectionError).operation).toBe('acquire');
    expect((attempt.error as Error).message).toMatch(/did not answer acquire within 300 ms .* The lock state is unknown; nothing ran under it\.$/);
    // It was the bound that ended the wait (a frozen server accepts the bytes and never answers).
    expect(attempt.ms).toBeGreaterThanOrEqual(COMMAND_TIMEOUT - 5);
    expect(attempt.ms).toBeLessThanOrEqual(suite.lateness.boundFor(attempt, COMMAND_TIMEOUT, SLACK));

    suite.redis.resume();
    // The unanswered attempt reaches Redis after the thaw, followed by the library's clean-up: no
    // lock for nobody, no queue entry.
    expect(await pollUntil(async () => (await suite.client.exists('t4:{a:key}', 't4:{a:key}:q', 't4:{a:key}:w')) === 0, 1_000)).toBe(true);
    const lock = await suite.calls.track('acquire after thaw', locks.acquire('a:key'));
    expect(await suite.calls.track('release after thaw', lock.release())).toBe(true);
  });

  it('(b) Redis frozen during hold: renewals fail, the signal aborts with LockLostError by the lease deadline, no unhandled rejection', async () => {
    const TTL = 1_000;
    const lost: Array<{ lock: LockHandle; error: LockLostError }> = [];
    const locks = await makeService({ ttl: TTL, onLockLost: (lock, error) => lost.push({ lock, error }) });
    const lock = await suite.calls.track('acquire', locks.acquire('b:key'));
    const aborted = abortOf(lock.signal);
    // One renewal succeeds first, so the frozen server interrupts a watchdog already at work.
    expect(await pollUntil(() => locks.getStats().renewals >= 1, TTL)).toBe(true);

    const pausedAt = hrMs();
    const pausedAtPerf = performance.now();
    suite.redis.pause();
    await expectFrozen();
    // No renewal can succeed from here on, so this is the deadline the library must honour
    // (monotonic ms; reading it has no side effect).
    const deadline = lock.deadline;
    const abort = await aborted;
    const afterPause = abort.at - pausedAt;
    const afterDeadline = abort.perfAt - deadline;
    // How late a timer due at the deadline could run in this process, as measured over that stretch.
    const allowed = suite.lateness.allowedLateness(deadline, abort.perfAt);
    const stats = locks.getStats();
    console.log(
      `T4 (b) lease lost ${afterPause.toFixed(1)} ms after the freeze (TTL ${TTL}), ${afterDeadline.toFixed(1)} ms after its deadline ` +
        `(measured timer lateness allows ${allowed.toFixed(1)} ms), reason ${(abort.reason as LockLostError).reason}, renewal errors ${stats.renewalErrors}`,
    );
    expect(abort.reason).toBeInstanceOf(LockLostError);
    expect((abort.reason as LockLostError).reason).toBe('expired');
    // Every lease deadline counts from a renewal sent before the freeze, so none lies past pausedAt + TTL...
    expect(deadline).toBeLessThan(pausedAtPerf + TTL);
    // ...and none earlier than the last successful renewal allows (renewals run every TTL/3, each later by
    // as long as this process was stalled when it was due).
    expect(deadline - pausedAtPerf).toBeGreaterThanOrEqual(TTL / 2 - suite.lateness.stalledMs(pausedAtPerf - TTL, pausedAtPerf));
    // The holder learns at its deadline (never before), as soon as this process runs a timer due then:
    // not whenever a renewal in flight happens to time out.
    expect(afterDeadline).toBeGreaterThanOrEqual(0);
    expect(afterDeadline).toBeLessThanOrEqual(allowed);
    expect(stats.renewalErrors).toBeGreaterThanOrEqual(1);
    expect(stats.lost).toBe(1);
    expect(lost).toHaveLength(1);
    expect(lost[0].lock).toBe(lock);
    expect(lost[0].error).toBe(abort.reason);
    expect(lock.isHeld()).toBe(false);

    const sentBeforeLoss = stats.renewals + stats.renewalErrors;
    suite.redis.resume();
    const thawedAt = hrMs();
    // Renewals sent before the loss wait in the frozen server's socket and run on the thaw; one that
    // lands just before Redis' own expiry may extend the key once more (owner-checked, so for our
    // token only and by one TTL at most). Nothing is sent after the loss, so the key is gone within
    // one TTL of the thaw and nobody waits longer than that.
    expect(await pollUntil(async () => (await suite.client.exists('t4:{b:key}')) === 0, TTL + SLACK)).toBe(true);
    console.log(`T4 (b) key gone ${(hrMs() - thawedAt).toFixed(1)} ms after the thaw`);
    const after = locks.getStats();
    expect(after.renewals + after.renewalErrors).toBe(sentBeforeLoss);
    expect(await suite.calls.track('release of the lost lock', lock.release())).toBe(false);
  });

  it('(c) Redis frozen during release: LockConnectionError within commandTimeout; the delete still lands after the thaw', async () => {
    const locks = await makeService({ ttl: 5_000 });
    const lock = await suite.calls.track('acquire', locks.acquire('c:key'));
    suite.redis.pause();
    await expectFrozen();

    // Every renewal the watchdog sends goes through here, whether Redis can be reached or not.
    const renewCalls = jest.spyOn(locks.engine.store, 'renewMany');
    // When the watchdog would have renewed this lease next (a third of the TTL after the acquire).
    const nextRenewalAt = Math.max(...lock.leases.map((l) => l.renewAt));
    const release = await timed(() => suite.calls.track('release', lock.release()));
    console.log(`T4 (c) release on a frozen Redis settled after ${release.ms.toFixed(1)} ms: ${(release.error as Error)?.name}`);
    expect(release.error).toBeInstanceOf(LockConnectionError);
    expect((release.error as LockConnectionError).operation).toBe('release');
    // The work under the lock did run: the message must not invite a retry of it, and says what is left.
    expect((release.error as Error).message).toMatch(
      /did not answer release within 300 ms .* the work under the lock ran, .* the key stays taken until its lease lapses/,
    );
    expect((release.error as Error).message).not.toMatch(/nothing ran/);
    expect(release.ms).toBeGreaterThanOrEqual(COMMAND_TIMEOUT - 5);
    expect(release.ms).toBeLessThanOrEqual(suite.lateness.boundFor(release, COMMAND_TIMEOUT, SLACK));
    expect(lock.isHeld()).toBe(false);
    const renewalsAtRelease = locks.getStats().renewals;

    suite.redis.resume();
    expect(await pollUntil(async () => (await suite.client.exists('t4:{c:key}')) === 0, 1_000)).toBe(true);
    // The watchdog dropped the lock at release: it does not keep renewing a lock whose release failed.
    // Watched until well past the moment its next renewal was due.
    await sleepUntil(nextRenewalAt + 300);
    expect(renewCalls).not.toHaveBeenCalled();
    expect(locks.getStats().renewals).toBe(renewalsAtRelease);
    expect(locks.getStats().renewalErrors).toBe(0);
  });

  it('(d) Redis killed: acquire, tryAcquire and isLocked fail fast with LockConnectionError, none hangs', async () => {
    const locks = await makeService({ ttl: 2_000 });
    const warmup = await suite.calls.track('acquire before the kill', locks.acquire('d:key'));
    expect(await suite.calls.track('release before the kill', warmup.release())).toBe(true);

    const pid = suite.redis.pid;
    const exit = await suite.redis.kill9();
    expect(exit.signal).toBe('SIGKILL');
    expect(isAlive(pid)).toBe(false);
    expect(await pingOnce(suite.redis.port, suite.redis.host, 150)).toBe(false);

    const results = [
      await timed(suite.calls.track('acquire', locks.acquire('d:key'))),
      await timed(suite.calls.track('tryAcquire', locks.tryAcquire('d:key'))),
      await timed(suite.calls.track('isLocked', locks.isLocked('d:key'))),
      await timed(
        suite.calls.track(
          'withLock',
          locks.withLock('d:key', () => 'ran'),
        ),
      ),
    ];
    console.log(`T4 (d) calls on a killed Redis settled after ${results.map((r) => r.ms.toFixed(1)).join(', ')} ms`);
    for (const r of results) {
      expect(r.error).toBeInstanceOf(LockConnectionError);
      expect(r.ms).toBeLessThanOrEqual(suite.lateness.boundFor(r, COMMAND_TIMEOUT, SLACK));
    }
  });

  it('(e) Redis restarted empty while a lock is held: the holder learns it lost the lock, and new acquires work within 1 s', async () => {
    const TTL = 3_000;
    const RENEW_INTERVAL = TTL / 3;
    const locks = await makeService({ ttl: TTL });
    const lock = await suite.calls.track('acquire', locks.acquire('e:key'));
    const aborted = abortOf(lock.signal);
    await sleep(200);

    const oldPid = suite.redis.pid;
    await suite.redis.restart();
    const backAt = hrMs();
    const backAtPerf = performance.now();
    expect(suite.redis.pid).not.toBe(oldPid);
    expect(isAlive(oldPid)).toBe(false);
    expect(await suite.client.exists('t4:{e:key}', 't4:{e:key}:f')).toBe(0);

    // A new acquire (through the same service's reconnecting connection) as soon as it can work.
    const {
      lock: next,
      attempts,
      ms: nextAt,
    } = await acquireUntilBack(suite.calls, 'acquire after restart', () => locks.acquire('e:other', { onBusy: 'throw' }), {
      since: backAt,
      giveUpMs: 2_000,
    });

    const abort = await aborted;
    const lostAfter = abort.at - backAt;
    console.log(
      `T4 (e) holder lost the lock ${lostAfter.toFixed(1)} ms after Redis was back (reason ${(abort.reason as LockLostError).reason}); ` +
        `a new acquire worked ${nextAt.toFixed(1)} ms after, on attempt ${attempts}`,
    );
    expect(next).toBeDefined();
    // Each bound plus the time this process was stalled meanwhile (see TimerLateness.stalledMs).
    expect(nextAt).toBeLessThanOrEqual(1_000 + suite.lateness.stalledMs(backAtPerf, performance.now()));
    expect(abort.reason).toBeInstanceOf(LockLostError);
    expect(lostAfter).toBeLessThanOrEqual(RENEW_INTERVAL + COMMAND_TIMEOUT + SLACK + suite.lateness.stalledMs(backAtPerf, abort.perfAt));

    // The old key is free for anyone, and its fencing token still increases although Redis lost the counter.
    const again = await suite.calls.track('acquire of the lost key', locks.acquire('e:key', { onBusy: 'throw' }));
    expect(again.fencingToken).toBeGreaterThan(lock.fencingToken);
    expect(await suite.calls.track('release of the lost lock', lock.release())).toBe(false);
    expect(await suite.client.get('t4:{e:key}')).toBe(again.token);
    expect(await suite.calls.track('release new', again.release())).toBe(true);
    expect(await suite.calls.track('release other', next!.release())).toBe(true);
  });
});
