/**
 * Reading a lock's `signal` checks its deadline first, so a holder whose event loop was blocked past its
 * ttl sees `aborted` before the watchdog's timer has run. A nested handle (withLock on a key its caller
 * already holds) borrows the key: it has no lease of its own, so the deadline to check is its outer
 * lock's. Before, it checked only its own (none) and relied on the outer signal's abort event, which
 * nothing fired until something read the outer lock: `aborted` stayed false past the outer lease's end.
 */
import { LockLostError, type Lock, type LockService } from '../../lib';
import { redisSuite } from './core-helpers';

/** Blocks this process's event loop for `ms`: no timer, no watchdog tick, no socket read runs meanwhile. */
function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: a synchronous stall, as a long GC, a CPU-bound loop or a paused process makes
  }
}

describe("a nested handle's signal, read after the outer lease ran out during a blocked event loop", () => {
  const suite = redisSuite();

  /** `depth` withLock calls on `key` inside one of 300 ms; the innermost handle is given to `body`. */
  async function nestedOn(service: LockService, key: string, depth: number, body: (inner: Lock) => void): Promise<void> {
    const nest = (level: number, lock: Lock): Promise<void> | void =>
      level === depth ? body(lock) : service.withLock(key, (next) => nest(level + 1, next));
    await service.withLock(key, (outer) => nest(0, outer), { ttl: 300 });
  }

  it.each([
    ['borrowing from the outer lock', 1],
    ['borrowing through another nested handle', 2],
  ])('aborts (%s) with LockLostError expired, as a top-level handle does', async (_what, depth) => {
    const service = await suite.pool.make();
    let seen: { aborted: boolean; reason: unknown; held: boolean } | undefined;
    await nestedOn(service, `nested-deadline:${depth}`, depth, (inner) => {
      expect(inner.signal.aborted).toBe(false); // read once before: its controller exists and follows the outer signal
      blockEventLoop(600); // twice the outer lease, with no renewal sent
      seen = { aborted: inner.signal.aborted, reason: inner.signal.reason, held: inner.isHeld() };
    });
    expect(seen?.aborted).toBe(true);
    expect(seen?.reason).toBeInstanceOf(LockLostError);
    expect((seen?.reason as LockLostError).reason).toBe('expired');
    expect(seen?.held).toBe(false);
  });

  it('(a top-level handle, for comparison: aborted on the first read after the block)', async () => {
    const service = await suite.pool.make();
    const lock = await service.acquire('nested-deadline:top', { ttl: 300 });
    expect(lock.signal.aborted).toBe(false);
    blockEventLoop(600);
    expect(lock.signal.aborted).toBe(true);
    expect(await lock.release()).toBe(false);
  });
});
