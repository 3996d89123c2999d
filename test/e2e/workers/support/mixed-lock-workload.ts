/**
 * The mixed workload of the resource-bounds suite: what a service running for weeks does, in small.
 * Every kind of call on many distinct keys, heavy contention on a few keys with waits that time out,
 * locks lost on purpose (tiny ttl, watchdog off, held past it), and waiters abandoned by a service
 * that closes while they are queued. Returns what happened, so the suite can check the faults did
 * happen (waits timed out, leases were lost) before it checks that nothing was left behind.
 */
import { LockLostError, LockServiceClosedError, LockTimeoutError, type LockService } from '../../../../lib';
import { engineCensus } from './resource-census';
import { sleep } from './timing';

const LOST_TTL = 500;

export interface WorkloadTally {
  calls: number;
  acquired: number;
  busy: number;
  timedOut: number;
  lost: number;
  closedWaits: number;
}

const emptyTally = (): WorkloadTally => ({ calls: 0, acquired: 0, busy: 0, timedOut: 0, lost: 0, closedWaits: 0 });

/** Runs `job(0 … n-1)` with at most `concurrency` running at once. */
async function inPool(n: number, concurrency: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const runner = async () => {
    while (next < n) await job(next++);
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, runner));
}

/** One call of every kind on keys no other call uses: `n` calls, `round` keeps rounds apart (distinct keys overall). */
async function distinctKeys(service: LockService, round: string, n: number, tally: WorkloadTally): Promise<void> {
  await inPool(n, 64, async (i) => {
    const key = `d:${round}:${i}`;
    tally.calls++;
    switch (i % 5) {
      case 0: {
        const lock = await service.acquire(key);
        await lock.release();
        break;
      }
      case 1: {
        const lock = await service.tryAcquire(key);
        if (!lock) throw new Error(`tryAcquire of the fresh key ${key} found it busy`);
        await lock.release();
        break;
      }
      case 2:
        await service.withLock(key, async (lock) => {
          // A nested call on the same key borrows it (reentrancy); an AsyncLocalStorage frame each.
          await service.withLock(key, async () => undefined);
          return lock.fencingToken;
        });
        break;
      case 3: {
        const lock = await service.acquire(key);
        await lock.extend();
        await lock.release();
        break;
      }
      default: {
        const lock = await service.acquire([key, `${key}:b`, `${key}:c`]);
        await lock.release();
      }
    }
    tally.acquired++;
  });
}

/**
 * `n` calls on three hot keys, 24 at a time, each holding 2-6 ms; waits of 1-25 ms, so most of those
 * that queue time out, and some multi-key calls on two hot keys at once. One in eight is a tryAcquire.
 */
async function contention(service: LockService, n: number, tally: WorkloadTally): Promise<void> {
  const hot = ['hot:0', 'hot:1', 'hot:2'];
  await inPool(n, 24, async (i) => {
    tally.calls++;
    const keys = i % 7 === 0 ? [hot[i % 3], hot[(i + 1) % 3]] : hot[i % 3];
    try {
      const lock = i % 8 === 0 ? await service.tryAcquire(keys) : await service.acquire(keys, { waitTimeout: 1 + (i % 25) });
      if (!lock) return void tally.busy++;
      tally.acquired++;
      await sleep(2 + (i % 5));
      await lock.release();
    } catch (error) {
      if (!(error instanceof LockTimeoutError)) throw error;
      tally.timedOut++;
    }
  });
}

/**
 * `n` locks with a short lease and no watchdog, held 100 ms past it: each is lost, and its release finds it
 * gone. (Shorter leases were too short for a loaded machine: 150 ms, the acquire's own answer came after it.)
 */
async function lostLocks(service: LockService, round: string, n: number, tally: WorkloadTally): Promise<void> {
  await inPool(n, 50, async (i) => {
    tally.calls++;
    const lock = await service.acquire(`lost:${round}:${i}`, { ttl: LOST_TTL, watchdog: false });
    tally.acquired++;
    await sleep(LOST_TTL + 100);
    if (!(lock.signal.reason instanceof LockLostError)) throw new Error(`a ${LOST_TTL} ms lease held ${LOST_TTL + 100} ms was not reported lost`);
    tally.lost++;
    if (await lock.release()) throw new Error('the release of a lost lock said it was still ours');
  });
}

/**
 * A second service queues `n` waiters on a key `service` holds, then closes while they wait: each
 * wait ends with LockServiceClosedError and its place in the queue must go.
 */
async function abandonedWaiters(service: LockService, other: LockService, round: string, n: number, tally: WorkloadTally): Promise<void> {
  const key = `abandoned:${round}`;
  const held = await service.acquire(key);
  const waits = Array.from({ length: n }, () =>
    other.acquire(key, { waitTimeout: 60_000 }).then(
      () => {
        throw new Error('a waiter got a key held by another service the whole time');
      },
      (error: unknown) => {
        if (!(error instanceof LockServiceClosedError)) throw error;
        tally.closedWaits++;
      },
    ),
  );
  tally.calls += n;
  // Every waiter queued (its busy answer registered its handover listener) before the close ends them.
  const queued = () => engineCensus(other).handoverListeners >= n;
  for (let tries = 0; !queued() && tries < 1_000; tries++) await sleep(5);
  if (!queued()) throw new Error(`the ${n} waiters of ${key} did not all queue`);
  await other.close();
  await Promise.all(waits);
  await held.release();
}

export interface WorkloadSize {
  distinct: number;
  contended: number;
  lost: number;
  abandoned: number;
}

/** One round of everything; `makeOther` makes the short-lived second service of the abandoned waiters. */
export async function mixedWorkload(
  service: LockService,
  makeOther: () => Promise<LockService>,
  round: string,
  size: WorkloadSize,
): Promise<WorkloadTally> {
  const tally = emptyTally();
  const other = await makeOther();
  await Promise.all([
    distinctKeys(service, round, size.distinct, tally),
    contention(service, size.contended, tally),
    lostLocks(service, round, size.lost, tally),
    abandonedWaiters(service, other, round, size.abandoned, tally),
  ]);
  return tally;
}
