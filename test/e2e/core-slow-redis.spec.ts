/**
 * T5 — a slow Redis: `CLIENT PAUSE <1.5×TTL> WRITE` (every lock script waits, reads still answer)
 * and `DEBUG SLEEP` (the whole server stops for longer than a TTL). An answer that comes back after
 * the lease it grants has run out must never be reported as a lock: every Lock returned is held at
 * return, its key carries our token with a positive PTTL, and a late grant is refused as
 * LockConnectionError and given back. Under repeated pauses two services hammering one key never
 * overlap.
 *
 * Each case proves the fault fired: a plain write from another client was held up for the pause,
 * the DEBUG SLEEP call itself took its time and a raw PING went unanswered meanwhile.
 */
import type Redis from 'ioredis';
import { DistributedLockModuleOptions, Lock, LockConnectionError, LockLostError, LockService } from '../../lib';
import { checkHistory, Section } from '../harness/history';
import { pingOnce } from '../harness/redis-ping';
import { now } from '../harness/worker-log';
import { startService, faultSuite } from './workers/support/fault-helpers';
import { abortOf, hrMs, pollUntil, sleep, timed } from './workers/support/timing';

const TTL = 1_000;
const PAUSE = 1_500; // 1.5 × TTL
/** Scheduling around a bounded call; the bounds below add the time this process was measured stalled meanwhile (suite.lateness). */
const SLACK = 100;
/**
 * A late grant must be given back (deleted), not left to lapse: Redis set it with a full TTL when it
 * ran the attempt, just before answering, so "gone within TTL / 3 of the answer" cannot be the TTL.
 */
const GIVEN_BACK_WITHIN = TTL / 3;
const BEYOND_LEASE = /beyond its \d+ ms lease/;

/** A returned lock as seen the instant acquire resolved, and what Redis said right then. */
interface Granted {
  lock: Lock;
  heldAtReturn: boolean;
  /** Lease left by the library's own clock at return (ms). */
  validityAtReturn: number;
  /** Lease left by the library's own clock when the owner and PTTL below had been answered (ms). */
  validityAtCheck: number;
  /** Owner token and PTTL of the key, asked in the same tick the lock was returned. */
  owner: string | null;
  pttl: number;
}

/**
 * Wraps an acquire: the check goes out in the same tick the lock is returned, before anything else
 * can run (a lock granted with little validity left is lost, and given back, moments later).
 */
function grantChecked(check: Redis, promise: Promise<Lock>): Promise<Granted> {
  return promise.then(async (lock) => {
    const heldAtReturn = lock.isHeld();
    const deadlineAtReturn = lock.deadline;
    const validityAtReturn = deadlineAtReturn - performance.now();
    const redisKey = `t5:{${lock.key}}`;
    const [[, owner], [, pttl]] = (await check.multi().get(redisKey).pttl(redisKey).exec()) as [[null, string | null], [null, number]];
    // Redis read the PTTL before its reply reached us: the library's view at that moment left at least this much.
    // The deadline the acquire returned, not the lock's deadline now: a watchdog renewal (its tick is shared
    // by every lock of the service, so it can come a moment after the acquire) may have been answered
    // meanwhile, and Redis may have run it after the PTTL (another connection): a run read PTTL 985 against
    // a renewed view of 986.6 ms.
    const validityAtCheck = deadlineAtReturn - performance.now();
    return { lock, heldAtReturn, validityAtReturn, validityAtCheck, owner, pttl };
  });
}

describe('T5 slow Redis: CLIENT PAUSE WRITE and DEBUG SLEEP', () => {
  let admin: Redis;
  let probe: Redis;
  const suite = faultSuite({ heal: () => admin.call('CLIENT', 'UNPAUSE').then(() => undefined) });

  beforeAll(() => {
    admin = suite.redis.client();
    probe = suite.redis.client();
  });

  const makeService = (options: Partial<DistributedLockModuleOptions> = {}): Promise<LockService> =>
    startService(suite.services, { redis: suite.redis.url, keyPrefix: 't5:', ttl: TTL, ...options });

  /** Pauses writes for `ms` and resolves with how long a plain SET from another client was held up. */
  async function pauseWrites(ms: number): Promise<{ pausedAt: number; probeMs: Promise<number> }> {
    // The probe's delay counts from when the CLIENT PAUSE was sent (the pause began after that): counted from
    // its answer, a loaded machine's late reading of that answer came off the delay (1447.9 ms for 1500).
    const sentAt = hrMs();
    await admin.call('CLIENT', 'PAUSE', String(ms), 'WRITE');
    const pausedAt = hrMs();
    const probeMs = probe.set('t5:probe', String(pausedAt)).then(() => hrMs() - sentAt);
    return { pausedAt, probeMs };
  }

  const grant = (promise: Promise<Lock>) => grantChecked(suite.client, promise);

  /** Polls (every 2 ms, up to `timeoutMs`) until `key` is gone; resolves with when (hrMs), or undefined. */
  async function goneAt(key: string, timeoutMs: number): Promise<number | undefined> {
    return (await pollUntil(async () => (await suite.client.exists(key)) === 0, timeoutMs, 2)) ? hrMs() : undefined;
  }

  /** Every returned lock: held at return with validity left, and Redis agrees (our token, a PTTL at least that long). */
  function expectValid(g: Granted): void {
    expect(g.heldAtReturn).toBe(true);
    expect(g.validityAtReturn).toBeGreaterThan(0);
    expect(g.owner).toBe(g.lock.token);
    expect(g.pttl).toBeGreaterThan(0);
    // Redis started the lease after the request was sent; the library's view never outlives it. Compared at
    // one moment: the PTTL is read a round trip after the return (a stall there made the PTTL 7 ms shorter
    // than the validity at return on a loaded machine), no later than the reply, when the library's view
    // had at least validityAtCheck left.
    expect(g.pttl + 2).toBeGreaterThanOrEqual(g.validityAtCheck);
  }

  it(`CLIENT PAUSE ${PAUSE} WRITE with a holder and a waiter: the holder learns at its deadline, a grant answered after its lease is refused, every returned lock is valid`, async () => {
    const holderSvc = await makeService({ commandTimeout: 2_500 });
    const waiterSvc = await makeService({ commandTimeout: 2_500, waitTimeout: 10_000 });
    const freshSvc = await makeService({ commandTimeout: 2_500 });
    const held = await suite.calls.track('holder acquire', holderSvc.acquire('pause:key'));
    const aborted = abortOf(held.signal);
    const waiter = timed(suite.calls.track('waiter acquire', grant(waiterSvc.acquire('pause:key'))));
    expect(await pollUntil(async () => (await suite.client.llen('t5:{pause:key}:q')) === 1, 1_000, 2)).toBe(true);
    // Pause right after a renewal was answered, so the next one is certainly caught by the pause.
    const renewals = holderSvc.getStats().renewals;
    expect(await pollUntil(() => holderSvc.getStats().renewals > renewals, TTL, 1)).toBe(true);

    const { pausedAt, probeMs } = await pauseWrites(PAUSE);
    const deadline = held.deadline;
    // An acquire of a free key sent now is answered only after the pause, i.e. after its lease ran out.
    const fresh = await timed(() => suite.calls.track('fresh acquire', freshSvc.acquire('pause:free')));
    // Looked at right away: the refused grant must be given back, not left to lapse by its TTL.
    const freeGoneAt = await goneAt('t5:{pause:free}', 2 * TTL);
    const freeGoneAtPerf = performance.now();
    const delayed = await probeMs;
    const abort = await aborted;
    const allowed = suite.lateness.allowedLateness(held.deadline, abort.perfAt);
    const waited = await waiter;
    console.log(
      `T5 pause: probe SET held ${delayed.toFixed(1)} ms; holder lost ${(abort.perfAt - deadline).toFixed(1)} ms after its deadline ` +
        `(${(abort.reason as LockLostError).reason}; measured timer lateness allows ${allowed.toFixed(1)} ms); fresh acquire settled after ` +
        `${fresh.ms.toFixed(1)} ms: ${(fresh.error as Error)?.message}; its key gone ${freeGoneAt === undefined ? 'never' : `${(freeGoneAt - fresh.at).toFixed(1)} ms later`}; ` +
        `waiter settled ${(waited.at - pausedAt).toFixed(1)} ms after the pause: ` +
        (waited.value
          ? `lock, validity at return ${waited.value.validityAtReturn.toFixed(1)} ms, PTTL ${waited.value.pttl} ms`
          : `${(waited.error as Error)?.message}`),
    );
    // The fault fired: writes really were held for the whole pause.
    expect(delayed).toBeGreaterThanOrEqual(PAUSE - 50);

    // The grant came back after its lease: refused, and given back.
    expect(fresh.error).toBeInstanceOf(LockConnectionError);
    expect((fresh.error as Error).message).toMatch(BEYOND_LEASE);
    expect(fresh.ms).toBeGreaterThanOrEqual(PAUSE - 50);
    expect(freeGoneAt).toBeDefined();
    // Give or take how long this process was stalled meanwhile (the give-back is sent from it, the poll too).
    expect(freeGoneAt! - fresh.at).toBeLessThanOrEqual(GIVEN_BACK_WITHIN + suite.lateness.stalledMs(fresh.settledPerf, freeGoneAtPerf));
    // It did reach Redis (the fence counter moved): it was refused, not lost.
    expect(await suite.client.exists('t5:{pause:free}:f')).toBe(1);

    // The holder could not renew and learned it at its deadline.
    expect(abort.reason).toBeInstanceOf(LockLostError);
    expect((abort.reason as LockLostError).reason).toBe('expired');
    expect(abort.perfAt - deadline).toBeGreaterThanOrEqual(0);
    expect(abort.perfAt - deadline).toBeLessThanOrEqual(allowed);
    expect(holderSvc.getStats().renewals).toBe(renewals + 1);

    // The waiter either got a valid lock (after the holder's loss) or was told the answer came too late.
    if (waited.value) {
      expectValid(waited.value);
      expect(waited.at).toBeGreaterThanOrEqual(abort.at);
      expect(waited.value.lock.fencingToken).toBeGreaterThan(held.fencingToken);
      // A grant with little validity left may already be lost (and given back) by now.
      const { lock } = waited.value;
      const stillHeld = lock.isHeld();
      expect(await suite.calls.track('waiter release', lock.release())).toBe(stillHeld);
    } else {
      expect(waited.error).toBeInstanceOf(LockConnectionError);
    }
    expect(await pollUntil(async () => (await suite.client.exists('t5:{pause:key}')) === 0, TTL + SLACK, 2)).toBe(true);
    expect(await suite.calls.track('release of the lost lock', held.release())).toBe(false);
  });

  it('two services hammering one key through repeated CLIENT PAUSEs: 0 overlaps, every returned lock valid', async () => {
    const RUN_MS = 6_500;
    const PAUSE_EVERY = 2_000;
    // One service whose calls outlast a pause (late answers must be refused), one whose calls time out first.
    const a = await makeService({ commandTimeout: 2_500, waitTimeout: 5_000 });
    const b = await makeService({ commandTimeout: 500, waitTimeout: 5_000 });
    const sections: Section[] = [];
    const checks: Granted[] = [];
    const failures: Record<string, number> = {};
    let cutShort = 0;
    let stop = false;

    async function hammer(name: string, locks: LockService): Promise<void> {
      try {
        await hammerLoop(name, locks);
      } finally {
        stop = true; // a failed expectation in one loop ends the other too
      }
    }

    async function hammerLoop(name: string, locks: LockService): Promise<void> {
      while (!stop) {
        let g: Granted;
        try {
          g = await suite.calls.track(`${name} acquire`, grant(locks.acquire('hammer')));
        } catch (error) {
          const kind = `${name}: ${(error as Error).name}${BEYOND_LEASE.test((error as Error).message) ? ' (beyond lease)' : ''}`;
          failures[kind] = (failures[kind] ?? 0) + 1;
          expect(error).toBeInstanceOf(LockConnectionError);
          await sleep(5);
          continue;
        }
        const acquiredAt = now();
        expectValid(g);
        checks.push(g);
        const enterAt = now();
        // Work as a lock-aware application does: stop when the signal says the lease is gone.
        const lost = abortOf(g.lock.signal);
        await Promise.race([sleep(20), lost]);
        if (g.lock.signal.aborted && !(g.lock.signal.reason instanceof DOMException)) cutShort++;
        const exitAt = now();
        const releasedOk = await suite.calls.track(`${name} release`, g.lock.release()).catch(() => false);
        sections.push({ worker: name, key: 'hammer', token: g.lock.token, fence: g.lock.fencingToken, acquiredAt, enterAt, exitAt, releasedOk });
      }
    }

    const started = hrMs();
    const crew = [hammer('a', a), hammer('b', b)];
    const delays: number[] = [];
    for (let at = 300; at + PAUSE < RUN_MS; at += PAUSE_EVERY) {
      await sleep(Math.max(0, started + at - hrMs()));
      const { probeMs } = await pauseWrites(PAUSE);
      delays.push(await probeMs);
    }
    await sleep(Math.max(0, started + RUN_MS - hrMs()));
    // At least 20 sections (checked below), waited for (bounded): the three pauses leave about 2 s of
    // RUN_MS unpaused, in which a loaded 2-core box made only 17-19.
    await pollUntil(() => stop || sections.length >= 20, 10_000, 20);
    stop = true;
    await Promise.all(crew);

    const report = checkHistory(sections);
    console.log(
      `T5 hammer: ${report.sections} sections in ${Math.round(hrMs() - started)} ms, ${delays.length} pauses (probe held ` +
        `${delays.map((d) => d.toFixed(0)).join('/')} ms), overlaps ${report.overlaps.length}, fence violations ${report.fenceViolations.length}, ` +
        `min validity at return ${Math.min(...checks.map((c) => c.validityAtReturn)).toFixed(1)} ms (PTTL ${Math.min(...checks.map((c) => c.pttl))} ms), cut short by loss ${cutShort}, failed acquires ${JSON.stringify(failures)}`,
    );
    // The faults fired: three pauses, each holding writes for the whole pause, and the library felt them.
    expect(delays.length).toBe(3);
    for (const d of delays) expect(d).toBeGreaterThanOrEqual(PAUSE - 50);
    expect(Object.values(failures).reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(1);
    // Nothing went wrong.
    expect(report.sections).toBeGreaterThanOrEqual(20);
    expect(new Set(sections.map((s) => s.worker)).size).toBe(2);
    expect(report.overlaps).toEqual([]);
    expect(report.fenceViolations).toEqual([]);
    expect(await pollUntil(async () => (await suite.client.exists('t5:{hammer}')) === 0, TTL + SLACK, 2)).toBe(true);
  }, 35_000);

  for (const config of [
    {
      name: 'commandTimeout shorter than the sleep',
      commandTimeout: 500,
      expectMs: [500 - 5, 500 + SLACK],
      message: /did not answer acquire within 500 ms/,
    },
    { name: 'commandTimeout longer than the sleep', commandTimeout: 3_000, expectMs: [TTL, PAUSE + 2 * SLACK], message: BEYOND_LEASE },
  ] as const) {
    it(`DEBUG SLEEP ${PAUSE / 1000} s (> TTL) during an acquire, ${config.name}: LockConnectionError, and the key does not stay locked`, async () => {
      const key = `sleep:${config.commandTimeout}`;
      const locks = await makeService({ commandTimeout: config.commandTimeout });
      const warm = await suite.calls.track('warm-up acquire', locks.acquire(key));
      expect(await suite.calls.track('warm-up release', warm.release())).toBe(true);
      const fenceBefore = Number(await suite.client.get(`t5:{${key}}:f`));

      const sleepStarted = hrMs();
      let wokeAtPerf = 0;
      const sleeping = admin.call('DEBUG', 'SLEEP', String(PAUSE / 1000)).then(() => {
        wokeAtPerf = performance.now();
        return hrMs();
      });
      // The server takes the DEBUG SLEEP before the acquire arrives on another connection.
      await sleep(20);
      const attempt = timed(() => suite.calls.track('acquire', locks.acquire(key)));
      // The fault fired: the server answers nothing while it sleeps.
      expect(await pingOnce(suite.redis.port, suite.redis.host, 150)).toBe(false);
      const result = await attempt;
      const wokeAt = await sleeping;
      console.log(
        `T5 DEBUG SLEEP (${config.name}): server slept ${(wokeAt - sleepStarted).toFixed(1)} ms; acquire settled after ` +
          `${result.ms.toFixed(1)} ms: ${(result.error as Error)?.message}`,
      );
      expect(wokeAt - sleepStarted).toBeGreaterThanOrEqual(PAUSE - 5);
      expect(result.value).toBeUndefined();
      expect(result.error).toBeInstanceOf(LockConnectionError);
      expect((result.error as LockConnectionError).operation).toBe('acquire');
      expect((result.error as Error).message).toMatch(config.message);
      expect(result.ms).toBeGreaterThanOrEqual(config.expectMs[0]);
      expect(result.ms).toBeLessThanOrEqual(suite.lateness.boundFor(result, config.expectMs[1], 0));

      // The attempt ran once the server woke (the fence moved: it took the key, with a full TTL by
      // Redis' clock), and was given back: gone well before that TTL could have run out.
      expect(await pollUntil(async () => Number(await suite.client.get(`t5:{${key}}:f`)) > fenceBefore, TTL, 2)).toBe(true);
      const gone = await goneAt(`t5:{${key}}`, 2 * TTL);
      const freeAfterWake = (gone ?? hrMs()) - wokeAt;
      console.log(
        `T5 DEBUG SLEEP (${config.name}): key free ${gone === undefined ? 'never' : `${freeAfterWake.toFixed(1)} ms after the server woke`}`,
      );
      expect(gone).toBeDefined();
      // Give or take how long this process was stalled meanwhile (the give-back is sent from it, the poll too).
      expect(freeAfterWake).toBeLessThanOrEqual(GIVEN_BACK_WITHIN + suite.lateness.stalledMs(wokeAtPerf, performance.now()));
      const next = await suite.calls.track('acquire after the sleep', locks.acquire(key, { onBusy: 'throw' }));
      expect(next.isHeld()).toBe(true);
      expect(await suite.calls.track('release after the sleep', next.release())).toBe(true);
    });
  }
});
