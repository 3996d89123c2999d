/**
 * A `fallback` is what withLock and @Locked resolve to when onBusy 'fail-fast' finds the key busy. Given where
 * it can never be used it was ignored without a word, and the caller got null, an error or a wait instead of the
 * value it believed it had set. Refused now with a LockOptionsError saying where a fallback works. In memory (the
 * testing module's store): no Redis needed.
 */
import 'reflect-metadata';
import type { LockService, WithLockOptions } from '../../lib';
import { LockOptionsError } from '../../lib';
import { LockTestingController } from '../../lib/testing';

describe('a fallback where it is never used is a LockOptionsError', () => {
  const testing = new LockTestingController();
  const services: LockService[] = [];
  const service = (options: Parameters<LockTestingController['createService']>[0] = {}): LockService => {
    const made = testing.createService(options);
    services.push(made);
    return made;
  };
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
  });

  describe('acquire() and tryAcquire(), which run no work a fallback could stand in for', () => {
    // Options typed for withLock, passed on: the compiler lets the fallback through.
    const failFast: WithLockOptions<string> = { onBusy: 'fail-fast', fallback: 'busy' };

    it('acquire() refuses a fallback (before: ignored, and a busy key resolved to null, not to it)', async () => {
      const locks = service();
      const held = testing.hold('fb:acquire');
      const refused = await locks.acquire('fb:acquire', failFast).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LockOptionsError);
      expect((refused as LockOptionsError).option).toBe('acquire options.fallback');
      expect((refused as Error).message).toMatch(
        /^Invalid option "acquire options\.fallback": acquire\(\) takes no fallback and would ignore it: .*use withLock\(key, fn, \{ onBusy: 'fail-fast', fallback \}\); or take tryAcquire\(\)'s null/,
      );
      // Any policy: a fallback is never acquire's answer. null counts as given.
      await expect(locks.acquire('fb:acquire', { onBusy: 'throw', fallback: null } as never)).rejects.toThrow(LockOptionsError);
      // Left out (or undefined), nothing changes.
      await expect(locks.acquire('fb:acquire', { onBusy: 'fail-fast', fallback: undefined } as never)).resolves.toBeNull();
      held.release();
    });

    it('tryAcquire() refuses a fallback (before: ignored, and a busy key resolved to null, not to it)', async () => {
      const locks = service();
      const held = testing.hold('fb:try');
      const refused = await locks.tryAcquire('fb:try', { fallback: 'busy' } as never).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LockOptionsError);
      expect((refused as Error).message).toMatch(
        /^Invalid option "tryAcquire options\.fallback": tryAcquire\(\) takes no fallback and would ignore it: a busy key resolves to null\. .*withLock\(key, fn, \{ onBusy: 'fail-fast', fallback \}\)/,
      );
      // Refused before the key is looked at: a free key does not make it pass.
      held.release();
      await expect(locks.tryAcquire('fb:try', { fallback: 'busy' } as never)).rejects.toThrow(LockOptionsError);
      expect(testing.isLocked('fb:try')).toBe(false);
    });
  });
});
