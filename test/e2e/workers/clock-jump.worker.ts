/**
 * T10 holder: runs under libfaketime (see test/harness/fake-clock.ts) while the parent moves its
 * wall clock. It takes KEY with the watchdog on and keeps checking, every 10 ms, that it still
 * holds it; the parent asks it what time it thinks it is, and finally tells it to release.
 *
 * env: REDIS_URL, KEY, TTL, WALL_CLOCK_LIB=1 (negative control: the library's monotonic clock is
 * replaced by Date.now before anything runs, so the parent can see the test catch a library that
 * reads the wall clock).
 * IPC in: {cmd: 'clock'} | {cmd: 'release'}.
 * Lines: acquired {token, fence, wall, mono}, aborted {name, reason, wall, mono} (at most once),
 * not-held {wall, mono} (first time isHeld() is false), clock {wall, mono, held, aborted},
 * released {result, stats}, closed.
 */
import { performance } from 'node:perf_hooks';
import { LockLostError, LockService } from '../../../lib';
import { emit, now } from '../../harness/worker-log';
import { sleep } from './support/timing';
import { requiredEnv } from './support/worker-env';

const env = requiredEnv('clock-jump.worker');

if (process.env.WALL_CLOCK_LIB === '1') {
  // The library calls the clock through the module's exports object (CommonJS), so this swaps it
  // for every caller. Done before the first lock exists: no lease mixes the two clocks.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const clock = require('../../../lib/time/clock') as { monotonicNow: () => number };
  clock.monotonicNow = () => Date.now();
}

/** Both clocks in one line, read back to back: the parent derives the wall-clock jump from them. */
const clocks = () => ({ wall: Date.now(), mono: performance.now(), at: now() });

async function main(): Promise<void> {
  const locks = new LockService({ redis: env('REDIS_URL'), keyPrefix: 't10:', ttl: Number(env('TTL')) });
  await locks.onModuleInit();
  const lock = await locks.acquire(env('KEY'));
  emit({ event: 'acquired', token: lock.token, fence: lock.fencingToken, ...clocks() });
  lock.signal.addEventListener('abort', () => {
    const reason = lock.signal.reason as Error;
    emit({ event: 'aborted', name: reason?.name, reason: reason instanceof LockLostError ? reason.reason : undefined, ...clocks() });
  });

  let releasing = false;
  const onMessage = (msg: { cmd: string }) => {
    if (msg.cmd === 'clock') emit({ event: 'clock', held: lock.isHeld(), aborted: lock.signal.aborted, ...clocks() });
    if (msg.cmd === 'release') releasing = true;
  };
  process.on('message', onMessage);

  // The guarded work: an async loop that asks the library, as a careful job would between steps.
  let reportedNotHeld = false;
  while (!releasing) {
    if (!reportedNotHeld && !lock.isHeld()) {
      reportedNotHeld = true;
      emit({ event: 'not-held', ...clocks() });
    }
    await sleep(10);
  }

  const result = await lock.release();
  emit({ event: 'released', result, stats: locks.getStats(), ...clocks() });
  await locks.close();
  // The IPC listener would keep the process alive.
  process.off('message', onMessage);
  emit({ event: 'closed' });
}

main().catch((error: unknown) => {
  process.stderr.write(`clock-jump.worker failed: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exitCode = 1;
});
