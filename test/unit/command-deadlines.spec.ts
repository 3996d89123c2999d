/**
 * The store bounds every Redis call with one shared timer (lib/internal/command-deadlines.ts).
 * These tests drive it with promises we settle by hand, so each case is exact.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { LockConnectionError } from '../../lib';
import { CommandDeadlines, CommandGate } from '../../lib/redis/command-deadlines';

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

describe('CommandDeadlines', () => {
  it('passes a reply through and turns a failure into LockConnectionError', async () => {
    const bounds = new CommandDeadlines(200);
    await expect(bounds.bound('acquire', async () => 42)).resolves.toBe(42);
    const failed = bounds.bound('release', () => Promise.reject(new Error('Connection is closed.')));
    await expect(failed).rejects.toBeInstanceOf(LockConnectionError);
    await expect(failed).rejects.toThrow(/release failed: Connection is closed/);
    const thrown = bounds.bound('extend', () => {
      throw new Error('sync');
    });
    await expect(thrown).rejects.toBeInstanceOf(LockConnectionError);
  });

  it('parses the reply in the same step, and runs a call once more when retryIf accepts its first failure', async () => {
    const bounds = new CommandDeadlines(200);
    await expect(bounds.bound('acquire', async () => '7', Number)).resolves.toBe(7);
    const attempts: number[] = [];
    const noScript = (e: unknown) => e instanceof Error && e.message.startsWith('NOSCRIPT');
    const recovered = bounds.bound(
      'release',
      async (attempt) => {
        attempts.push(attempt);
        if (attempt === 0) throw new Error('NOSCRIPT No matching script.');
        return 1;
      },
      undefined,
      noScript,
    );
    await expect(recovered).resolves.toBe(1);
    expect(attempts).toEqual([0, 1]);
    // Only once: a second failure is the answer.
    const twice = bounds.bound('release', async () => Promise.reject(new Error('NOSCRIPT still')), undefined, noScript);
    await expect(twice).rejects.toThrow(/release failed: NOSCRIPT still/);
    // Other errors are not retried.
    let calls = 0;
    const other = bounds.bound('extend', async () => (calls++, Promise.reject(new Error('READONLY'))), undefined, noScript);
    await expect(other).rejects.toBeInstanceOf(LockConnectionError);
    expect(calls).toBe(1);
    expect(bounds.inFlight).toBe(0);
  });

  it('fails only the calls that did not settle in time, each at its own deadline, whatever the order they settle in', async () => {
    const bounds = new CommandDeadlines(150);
    const a = deferred<string>();
    const b = deferred<string>();
    const started = performance.now();
    const first = bounds.bound('acquire', () => a.promise);
    await sleep(60);
    const second = bounds.bound('release', () => b.promise);
    const third = bounds.bound('extend', async () => 'fast');
    // The oldest call stays pending; a younger one settles first.
    await expect(third).resolves.toBe('fast');
    b.resolve('second');
    await expect(second).resolves.toBe('second');
    const error = await first.catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as Error).message).toMatch(/did not answer acquire within 150 ms/);
    expect(elapsed).toBeGreaterThanOrEqual(149);
    expect(elapsed).toBeLessThan(400);
    // A reply after the deadline changes nothing.
    a.resolve('late');
    await sleep(5);
  });

  it('hands a reply that comes after the deadline to `late` (what the call did after all), and only that one', async () => {
    const bounds = new CommandDeadlines(30);
    const seen: unknown[] = [];
    const slow = deferred<string>();
    const timedOut = bounds.bound(
      'acquire',
      () => slow.promise,
      undefined,
      undefined,
      undefined,
      (reply) => seen.push(reply),
    );
    await expect(timedOut).rejects.toThrow(/did not answer acquire within 30 ms/);
    slow.resolve('granted late');
    await sleep(0);
    expect(seen).toEqual(['granted late']);
    await bounds.bound(
      'acquire',
      async () => 'in time',
      undefined,
      undefined,
      undefined,
      (reply) => seen.push(reply),
    );
    expect(seen).toEqual(['granted late']);
  });

  it('keeps timing out later calls after an idle period (the timer re-arms itself)', async () => {
    const bounds = new CommandDeadlines(50);
    await bounds.bound('acquire', async () => 1);
    await sleep(120); // the timer fired with nothing pending
    const never = new Promise<never>(() => undefined);
    const started = performance.now();
    await expect(bounds.bound('acquire', () => never)).rejects.toBeInstanceOf(LockConnectionError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(49);
  });

  it('holds thousands of calls in flight and fails the stuck ones together', async () => {
    const bounds = new CommandDeadlines(80);
    const stuck = Array.from({ length: 2_000 }, (_, i) =>
      i % 2 ? bounds.bound('renew', () => new Promise<never>(() => undefined)) : bounds.bound('renew', async () => i),
    );
    const results = await Promise.allSettled(stuck);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1_000);
    expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof LockConnectionError)).toHaveLength(1_000);
  });

  describe('with a gate (the connection state)', () => {
    /** A gate driven by hand: `state` decides admission, `ready()` releases the waiting calls. */
    function handGate(state: { admit: undefined | Error | 'wait' }) {
      const waiting = new Set<() => void>();
      const gate: CommandGate = {
        admit: () => state.admit,
        whenReady: (send) => (waiting.add(send), () => void waiting.delete(send)),
        notReachable: (operation, ms) => new LockConnectionError(`no connection within ${ms} ms for ${operation}`, operation),
        explain: (operation, error) =>
          (error as Error).message === 'ioredis words' ? new LockConnectionError(`explained ${operation}`, operation) : undefined,
      };
      return { gate, waiting, ready: () => [...waiting].forEach((send) => (waiting.delete(send), send())) };
    }

    it('refuses at once without running the call, holds a call until ready within its deadline, and explains transport errors', async () => {
      const state: { admit: undefined | Error | 'wait' } = { admit: new LockConnectionError('down', 'acquire') };
      const { gate, waiting, ready } = handGate(state);
      const bounds = new CommandDeadlines(100, gate);
      let runs = 0;
      const run = async () => ++runs;
      await expect(bounds.bound('acquire', run)).rejects.toThrow(/^down$/);
      expect(runs).toBe(0);

      state.admit = 'wait';
      const held = bounds.bound('acquire', run);
      await sleep(30);
      expect(runs).toBe(0);
      // Called back while the gate still says 'wait' (the new connection's check is running): it asks again and waits on.
      ready();
      await sleep(10);
      expect(runs).toBe(0);
      expect(waiting.size).toBe(1);
      state.admit = undefined;
      ready();
      await expect(held).resolves.toBe(1);

      // Called back with a refusal (the connection's check refused it): the call fails with it, nothing sent.
      state.admit = 'wait';
      const refused = bounds.bound('acquire', run);
      state.admit = new LockConnectionError('a replica', 'acquire');
      ready();
      await expect(refused).rejects.toThrow(/^a replica$/);
      expect(runs).toBe(1);
      expect(bounds.inFlight).toBe(0);

      state.admit = 'wait';
      const started = performance.now();
      await expect(bounds.bound('release', run)).rejects.toThrow(/no connection within 100 ms for release/);
      expect(performance.now() - started).toBeLessThan(300);
      expect(waiting.size).toBe(0); // the timed-out call stopped waiting
      expect(runs).toBe(1);

      state.admit = undefined;
      await expect(bounds.bound('renew', () => Promise.reject(new Error('ioredis words')))).rejects.toThrow(/explained renew/);
      await expect(bounds.bound('renew', () => Promise.reject(new Error('other')))).rejects.toThrow(/renew failed: other/);
    });
  });
});
