/**
 * T10 — the holder's wall clock jumps by an hour mid-hold. A holder process runs under libfaketime
 * (only the wall clock faked: see test/harness/fake-clock.ts) with a 600 ms lease and the
 * watchdog on; the test moves its clock +1 h, back, −1 h and back, one second apart, then has it
 * release. Leases, deadlines and the watchdog use the monotonic clock only, so:
 * - the holder's signal never aborts and isHeld() stays true (0 spurious lost signals), and its
 *   release() resolves true;
 * - Redis keeps the key throughout (PTTL sampled by this process, whose clock is real);
 * - renewals, timed by Redis itself (MONITOR), come every TTL/3 in every phase, as many as the hold
 *   calls for.
 * Each jump is checked as seen by the holder (Date.now() moved by ±1 h against performance.now()).
 *
 * Negative controls: the same holder with the library's clock swapped for Date.now() loses the lock
 * at once on +1 h although Redis still holds it, and on −1 h stops renewing, so Redis lets the key
 * lapse while the holder still believes it holds it. Either would fail the first test.
 */
import * as path from 'path';
import type Redis from 'ioredis';
import { FakeWallClock } from '../harness/fake-clock';
import { isRenewScript, startMonitor } from '../harness/redis-monitor';
import { RedisProcess } from '../harness/redis-process';
import { killSurvivors, startWorker, WorkerHandle, WorkerLine } from '../harness/worker-process';
import { pollUntil, sleep } from './workers/support/timing';

const TTL = 600;
const RENEW_EVERY = TTL / 3;
const PHASE_MS = 1_000;
const HOUR = 3_600_000;
/** The holder's wall-clock offset in each phase: jumps of +1 h, −1 h, −1 h, +1 h. */
const PHASES = [
  { offset: '+0', hours: 0 },
  { offset: '+1h', hours: 1 },
  { offset: '+0', hours: 0 },
  { offset: '-1h', hours: -1 },
  { offset: '+0', hours: 0 },
];
/** How far an observed jump may be from ±1 h. Measured: within 1 ms; an hour is what matters. */
const JUMP_TOLERANCE_MS = 1_000;
const WORKER = path.join(__dirname, 'workers', 'clock-jump.worker.ts');

interface PttlSample {
  /** This process's Date.now() (a real clock, the same one Redis stamps MONITOR lines with). */
  at: number;
  pttl: number;
  owner: string | null;
}

/** Samples the key's PTTL and owner every 25 ms until stop(). */
function samplePttl(client: Redis, lockKey: string): { samples: PttlSample[]; stop: () => Promise<void> } {
  const samples: PttlSample[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const replies = (await client.pipeline().pttl(lockKey).get(lockKey).exec()) ?? [];
      samples.push({ at: Date.now(), pttl: Number(replies[0][1]), owner: replies[1][1] as string | null });
      await sleep(25);
    }
  })();
  return {
    samples,
    stop: () => {
      stopped = true;
      return loop;
    },
  };
}

/** Asks the worker for its clocks and waits for the answer (a line after those already received). */
async function askClock(worker: WorkerHandle): Promise<WorkerLine> {
  const after = worker.lines.length;
  await worker.send({ cmd: 'clock' });
  return worker.waitFor((l, i) => i >= after && l.event === 'clock', 2_000);
}

/** How far the worker's wall clock moved against its monotonic clock between two of its lines. */
const wallJump = (from: WorkerLine, to: WorkerLine): number => to.wall - to.mono - (from.wall - from.mono);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

describe('T10 the holder’s wall clock jumps by an hour mid-hold', () => {
  let redis: RedisProcess;
  let client: Redis;
  let clock: FakeWallClock;
  const cleanups: Array<() => unknown> = [];

  beforeAll(async () => {
    // Throws "Install it with: sudo apt-get install -y faketime" when libfaketime is missing.
    clock = new FakeWallClock();
    redis = await RedisProcess.start();
    client = redis.client();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(async () => {
    await redis?.stop();
    clock?.dispose();
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));

  /** Starts a holder of `key` under the fake clock (set to real time first). */
  async function startHolder(key: string, env: Record<string, string> = {}): Promise<{ worker: WorkerHandle; acquired: WorkerLine }> {
    clock.set('+0');
    const worker = startWorker(WORKER, { env: { REDIS_URL: redis.url, KEY: key, TTL: String(TTL), ...clock.env(), ...env } });
    cleanups.push(() => worker.stop());
    return { worker, acquired: await worker.waitFor((l) => l.event === 'acquired', 10_000) };
  }

  async function releaseAndExit(worker: WorkerHandle): Promise<WorkerLine> {
    await worker.send({ cmd: 'release' });
    const released = await worker.waitFor((l) => l.event === 'released', 5_000);
    await worker.waitFor((l) => l.event === 'closed', 5_000);
    expect(await worker.exited).toEqual({ code: 0, signal: null });
    return released;
  }

  it('±1 h jumps: 0 lost signals, PTTL > 0 throughout, a renewal every TTL/3 in every phase', async () => {
    const lockKey = 't10:{job}';
    const monitor = await startMonitor(redis);
    cleanups.push(monitor.stop);
    const { worker, acquired } = await startHolder('job');
    const heldFrom = Date.now();
    const pttl = samplePttl(client, lockKey);
    cleanups.push(pttl.stop);

    const phases: Array<{ startedAt: number; probe: WorkerLine }> = [];
    for (const phase of PHASES) {
      clock.set(phase.offset);
      phases.push({ startedAt: Date.now(), probe: await askClock(worker) });
      await sleep(PHASE_MS);
    }
    await pttl.stop(); // before the release, which rightly removes the key
    const heldUntil = Date.now();
    const linesWhileHeld = worker.lines.length;
    const released = await releaseAndExit(worker);

    // The fault happened: the holder's Date.now() moved by ±1 h against its monotonic clock.
    const jumps = phases.map((p, i) => wallJump(i === 0 ? acquired : phases[i - 1].probe, p.probe));
    const expectedJumps = PHASES.map((p, i) => (p.hours - (i === 0 ? 0 : PHASES[i - 1].hours)) * HOUR);

    // Renewals as Redis ran them, and the gaps between them, each counted in the phase it ends in.
    const renewals = monitor.seen.filter((c) => isRenewScript(c) && c.args[3] === lockKey).map((c) => c.at);
    const gaps = renewals.slice(1).map((at, k) => ({ at, gap: at - renewals[k] }));
    const phaseOf = (at: number) => phases.filter((p) => p.startedAt <= at).length - 1;
    const gapsByPhase = phases.map((_, i) => gaps.filter((g) => phaseOf(g.at) === i).map((g) => g.gap));
    const medians = gapsByPhase.map(median);
    const renewalsWhileHeld = renewals.filter((at) => at >= heldFrom && at <= heldUntil).length;
    const expectedRenewals = (heldUntil - heldFrom) / RENEW_EVERY;
    const minPttl = Math.min(...pttl.samples.map((s) => s.pttl));

    console.log(
      `T10: holder's Date.now() jumps ${jumps.map((j) => `${j >= 0 ? '+' : ''}${(j / 1000).toFixed(3)} s`).join(', ')}; ` +
        `renewal gap medians per phase ${medians.map((m) => m.toFixed(1)).join(' / ')} ms ` +
        `(n = ${gapsByPhase.map((g) => g.length).join('/')}, min ${Math.min(...gaps.map((g) => g.gap)).toFixed(1)}, ` +
        `max ${Math.max(...gaps.map((g) => g.gap)).toFixed(1)} ms); ${renewalsWhileHeld} renewals in ${heldUntil - heldFrom} ms ` +
        `(expected ≈ ${expectedRenewals.toFixed(1)}); ${pttl.samples.length} PTTL samples, min ${minPttl} ms`,
    );

    jumps.forEach((j, i) => expect(Math.abs(j - expectedJumps[i])).toBeLessThan(JUMP_TOLERANCE_MS));
    // 0 spurious lost signals: never aborted, isHeld() true at every 10 ms check and every probe.
    // (The one abort after that is release() itself: reason AbortError.)
    expect(worker.lines.slice(0, linesWhileHeld).filter((l) => l.event === 'aborted' || l.event === 'not-held')).toEqual([]);
    expect(worker.lines.filter((l) => l.event === 'aborted').map((l) => l.name)).toEqual(['AbortError']);
    expect(phases.every((p) => p.probe.held === true && p.probe.aborted === false)).toBe(true);
    expect(released.result).toBe(true);
    expect(released.stats.lost).toBe(0);
    expect(released.stats.renewalErrors).toBe(0);
    // Redis kept the key, with the holder's token, from acquisition to release.
    expect(pttl.samples.length).toBeGreaterThanOrEqual(100);
    expect(pttl.samples.every((s) => s.pttl > 0 && s.owner === acquired.token)).toBe(true);
    // Renew cadence unchanged: TTL/3 in every phase, no bunching, and as many renewals as the hold needs.
    for (const phaseGaps of gapsByPhase) expect(phaseGaps.length).toBeGreaterThanOrEqual(3);
    for (const m of medians) {
      expect(Math.abs(m - RENEW_EVERY)).toBeLessThan(50);
      expect(Math.abs(m - medians[0])).toBeLessThan(40);
    }
    expect(Math.min(...gaps.map((g) => g.gap))).toBeGreaterThan(RENEW_EVERY / 2);
    expect(renewalsWhileHeld).toBeGreaterThanOrEqual(0.75 * expectedRenewals);
    expect(renewalsWhileHeld).toBeLessThanOrEqual(1.1 * expectedRenewals + 1);
  });

  describe('negative control: the library’s clock swapped for Date.now()', () => {
    const WALL_CLOCK_LIB = { WALL_CLOCK_LIB: '1' };

    it('+1 h: the holder is told it lost the lock although Redis still holds it for the holder', async () => {
      const lockKey = 't10:{control-forward}';
      const { worker, acquired } = await startHolder('control-forward', WALL_CLOCK_LIB);
      await sleep(RENEW_EVERY + 100); // past the first renewal
      const [pttlBefore, ownerBefore] = await Promise.all([client.pttl(lockKey), client.get(lockKey)]);
      clock.set('+1h');
      const jumpedAt = performance.now();
      const aborted = await worker.waitFor((l) => l.event === 'aborted', 2_000);
      const abortedAfter = performance.now() - jumpedAt;
      const released = await releaseAndExit(worker);
      console.log(
        `T10 control +1 h: lost (${aborted.name}, ${aborted.reason}) ${abortedAfter.toFixed(0)} ms after the jump, ` +
          `while Redis still had ${pttlBefore} ms left on the key; wall jump seen ${((aborted.wall - aborted.mono - (acquired.wall - acquired.mono)) / 1000).toFixed(3)} s`,
      );
      expect(ownerBefore).toBe(acquired.token);
      expect(pttlBefore).toBeGreaterThan(0);
      expect(Math.abs(wallJump(acquired, aborted) - HOUR)).toBeLessThan(JUMP_TOLERANCE_MS);
      expect(aborted).toMatchObject({ name: 'LockLostError', reason: 'expired' });
      expect(released.result).toBe(false);
      expect(released.stats.lost).toBe(1);
    });

    it('−1 h: renewals stop, Redis lets the key lapse, and the holder still believes it holds the lock', async () => {
      const lockKey = 't10:{control-back}';
      const monitor = await startMonitor(redis);
      cleanups.push(monitor.stop);
      const { worker, acquired } = await startHolder('control-back', WALL_CLOCK_LIB);
      await sleep(RENEW_EVERY + 100);
      clock.set('-1h');
      const jumpedAt = Date.now();
      const lapsed = await pollUntil(async () => (await client.exists(lockKey)) === 0, 3 * TTL, 10);
      const lapsedAfter = Date.now() - jumpedAt;
      const probe = await askClock(worker);
      const renewalsAfterJump = monitor.seen.filter((c) => isRenewScript(c) && c.args[3] === lockKey && c.at > jumpedAt + 10).length;
      const released = await releaseAndExit(worker);
      console.log(
        `T10 control −1 h: key gone from Redis ${lapsedAfter} ms after the jump, ${renewalsAfterJump} renewals after it; ` +
          `holder still says isHeld() = ${probe.held}; wall jump seen ${(wallJump(acquired, probe) / 1000).toFixed(3)} s`,
      );
      expect(Math.abs(wallJump(acquired, probe) + HOUR)).toBeLessThan(JUMP_TOLERANCE_MS);
      expect(lapsed).toBe(true);
      expect(renewalsAfterJump).toBe(0);
      expect(probe).toMatchObject({ held: true, aborted: false });
      expect(released.result).toBe(false);
    });
  });
});
