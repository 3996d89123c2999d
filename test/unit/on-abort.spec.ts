import { getEventListeners } from 'node:events';
import { onAbort } from '../../lib/time/on-abort';
import { interruptibleDelay } from '../../lib/time/sleep';
import { pollUntil, redisSuite } from './core-helpers';

// Many callers waiting on one busy key all sleep on their service's shutdown signal. Node's EventTarget
// compares every listener of a signal on each add, so one listener per waiter made queuing O(N²):
// 10,000 callers on one held key blocked the event loop for about a second. These tests count the
// listeners themselves (a count cannot be flaky where a timing would be).
describe('onAbort: many waiters behind one abort listener', () => {
  it('calls each callback once when the signal aborts, and not the ones that stopped listening', () => {
    const controller = new AbortController();
    const calls: number[] = [];
    const stops = [0, 1, 2, 3].map((i) => onAbort(controller.signal, () => calls.push(i)));
    stops[1]();
    stops[1]();
    controller.abort();
    controller.abort();
    expect(calls.sort()).toEqual([0, 2, 3]);
    stops[0](); // after the abort: nothing to stop, no error
  });

  it('a callback may stop another one while the abort is being delivered', () => {
    const controller = new AbortController();
    const calls: string[] = [];
    let stopSecond = (): void => undefined;
    onAbort(controller.signal, () => {
      calls.push('first');
      stopSecond();
    });
    stopSecond = onAbort(controller.signal, () => calls.push('second'));
    controller.abort();
    expect(calls).toEqual(['first']);
  });

  it('the same function registered by two waiters is two callbacks', () => {
    const controller = new AbortController();
    let calls = 0;
    const callback = () => calls++;
    onAbort(controller.signal, callback);
    const stop = onAbort(controller.signal, callback);
    stop();
    onAbort(controller.signal, callback);
    controller.abort();
    expect(calls).toBe(2);
  });

  it('the last callback that stops listening takes the abort listener off the signal; a later one puts it back', () => {
    // A caller's signal can outlive many lock calls: each call's listening must end with the call.
    const controller = new AbortController();
    const stops = [onAbort(controller.signal, () => undefined), onAbort(controller.signal, () => undefined)];
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    stops[0]();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    stops[1]();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    let called = 0;
    onAbort(controller.signal, () => called++);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort();
    expect(called).toBe(1);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('1,000 pauses on one signal add one abort listener to it, and all end when it aborts', async () => {
    const controller = new AbortController();
    const pauses = Array.from({ length: 1_000 }, () => interruptibleDelay(60_000, controller.signal));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    pauses[0].wake();
    await pauses[0].promise;
    controller.abort();
    await Promise.all(pauses.map((p) => p.promise));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  describe('through LockService', () => {
    const suite = redisSuite();

    it('200 callers queued on one held key leave one listener on the service shutdown signal, and are all served in turn', async () => {
      const holder = await suite.pool.make();
      const waiting = await suite.pool.make();
      const held = await holder.acquire('herd');
      const served: number[] = [];
      const callers = Array.from({ length: 200 }, (_, i) =>
        waiting.acquire('herd', { waitTimeout: 30_000 }).then(async (lock) => {
          served.push(i);
          await lock.release();
        }),
      );
      const shutdown = waiting.engine.drainSignal;
      // Every caller's first attempt came back busy and it is pausing in the queue.
      expect(await pollUntil(async () => (await suite.client.llen('test:{herd}:q')) === 200, 10_000)).toBe(true);
      expect(await pollUntil(() => getEventListeners(shutdown, 'abort').length > 0, 5_000)).toBe(true);
      // One for the pauses (old code: one per caller) and at most the service's own.
      expect(getEventListeners(shutdown, 'abort').length).toBeLessThanOrEqual(2);
      await held.release();
      await Promise.all(callers);
      expect(served).toEqual(Array.from({ length: 200 }, (_, i) => i));
    });
  });
});
