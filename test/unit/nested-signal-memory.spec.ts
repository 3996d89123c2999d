/**
 * The signal of a nested lock handle follows its outer locks' signals. Made with AbortSignal.any, each
 * nested handle whose `signal` was read stayed reachable from the outer lock's signal (about 2 KB
 * each, measured on Node 20) until the outer lock itself was gone: a job holding one lock for hours
 * around many nested @Locked/withLock calls that pass `lock.signal` on (to fetch, to a driver) grew
 * with the number of those calls, not with what it held.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LockLostError, LockService } from '../../lib';
import { memoryBackend } from '../../lib/testing/memory-backend';
import { MemoryLockSpace } from '../../lib/testing/memory-lock-space';

/** A full collection, without starting Node with --expose-gc. */
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

const heapAfterCollection = (): number => {
  collect();
  return process.memoryUsage().heapUsed;
};

const NESTED_CALLS = 20_000;

describe('the signal of a nested lock handle', () => {
  let service: LockService;
  beforeEach(async () => {
    service = new LockService({ keyPrefix: 'nested:' }, memoryBackend(new MemoryLockSpace()));
    await service.onModuleInit();
  });
  afterEach(() => service.close());

  it('is not kept by the outer lock once its nested call ended, however many there were', async () => {
    let grewBy = 0;
    await service.withLock('outer', async () => {
      // Warm-up: code paths compiled, pools filled.
      for (let i = 0; i < 1_000; i++) await service.withLock('outer', async (lock) => void lock.signal);
      const before = heapAfterCollection();
      for (let i = 0; i < NESTED_CALLS; i++) await service.withLock(['outer', `inner:${i % 10}`], async (lock) => void lock.signal);
      grewBy = heapAfterCollection() - before;
    });
    console.log(`heap after ${NESTED_CALLS} nested calls reading signal: ${(grewBy / 1024).toFixed(0)} KiB more`);
    // 20,000 x about 2 KB (40 MB) when each stayed reachable; a few MB of noise at most otherwise.
    expect(grewBy).toBeLessThan(8 * 1024 * 1024);
  });

  it("aborts with the outer lock's loss while the nested call runs, and at its own end otherwise", async () => {
    // Outer lease 300 ms, not renewed: lost at its deadline while the nested call still runs.
    const lost = await service
      .withLock(
        'short',
        async () =>
          service.withLock(['short', 'inner'], async (nested) => {
            const aborted = new Promise<unknown>((resolve) => nested.signal.addEventListener('abort', () => resolve(nested.signal.reason)));
            return aborted;
          }),
        { ttl: 300, watchdog: false },
      )
      .catch((error: unknown) => error);
    expect(lost).toBeInstanceOf(LockLostError);
    expect((lost as LockLostError).key).toBe('short');

    let ended: AbortSignal | undefined;
    await service.withLock('long', () => service.withLock(['long', 'inner'], async (nested) => void (ended = nested.signal)));
    expect(ended!.aborted).toBe(true);
    expect(ended!.reason).not.toBeInstanceOf(LockLostError); // released, not lost
  });
});
