/**
 * A `fallback` is what withLock and @Locked resolve to when onBusy 'fail-fast' finds the key busy. Given where
 * it can never be used it was ignored without a word, and the caller got null, an error or a wait instead of the
 * value it believed it had set. Refused now with a LockOptionsError saying where a fallback works. In memory (the
 * testing module's store): no Redis needed.
 */
import 'reflect-metadata';
import { DynamicModule, Injectable, INestApplicationContext, Module, Scope } from '@nestjs/common';
import { ContextIdFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import type { LockedOptions, LockService, WithLockOptions } from '../../lib';
import { Locked, LockOptionsError } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';

/** A fallback with no onBusy beside it: what the module's default onBusy decides (typed as a variable, as a wrapper decorator would pass it). */
const FALLBACK_ONLY: LockedOptions = { fallback: 'skipped' };

@Injectable()
class Ticks {
  runs = 0;

  @Locked('fb:tick', FALLBACK_ONLY)
  async tick(): Promise<string> {
    this.runs++;
    return 'ran';
  }
}

/** Inherits the method: its fallback is checked on the subclass's instances too. */
@Injectable()
class NightlyTicks extends Ticks {}

@Injectable({ scope: Scope.REQUEST })
class RequestTicks {
  static runs = 0;

  @Locked('fb:request', FALLBACK_ONLY)
  async tick(): Promise<string> {
    RequestTicks.runs++;
    return 'ran';
  }
}

@Injectable({ scope: Scope.TRANSIENT })
class TransientTicks {
  @Locked('fb:transient', FALLBACK_ONLY)
  async tick(): Promise<string> {
    return 'ran';
  }
}

@Injectable()
class UsesTransientTicks {
  constructor(readonly ticks: TransientTicks) {}
}

@Injectable()
class FailFastTicks {
  @Locked('fb:explicit', { onBusy: 'fail-fast', fallback: 'skipped' })
  async tick(): Promise<string> {
    return 'ran';
  }
}

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

  describe("withLock() with a fallback whose onBusy, given or the module's default, is not 'fail-fast'", () => {
    it("is refused when the module's default onBusy applies (before: ignored; the call waited, threw or ran)", async () => {
      const fn = jest.fn(() => 'ran');
      // The built-in default, 'retry': on a free key the call ran fn, so nobody saw that the fallback would never apply.
      const refused = await service()
        .withLock('fb:with', fn, { fallback: 'busy' })
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LockOptionsError);
      expect((refused as Error).message).toBe(
        `Invalid option "withLock options.fallback": a fallback is only used with onBusy: 'fail-fast', and no onBusy is given with it, ` +
          `so the module's default applies: 'retry', under which a busy key is waited for (LockTimeoutError after waitTimeout), and the ` +
          `fallback would never be used. Give onBusy: 'fail-fast' with it: withLock(key, fn, { onBusy: 'fail-fast', fallback }).`,
      );
      // A module default of 'throw': a busy key rejected with LockBusyError instead of resolving to the fallback.
      const throwing = service({ onBusy: 'throw' });
      const held = testing.hold('fb:with');
      await expect(throwing.withLock('fb:with', fn, { fallback: 'busy' })).rejects.toThrow(
        /module's default applies: 'throw', under which a busy key rejects with LockBusyError/,
      );
      expect(fn).not.toHaveBeenCalled();
      held.release();
    });

    it('is refused when the onBusy given with it is not fail-fast', async () => {
      const locks = service({ onBusy: 'fail-fast' });
      await expect(locks.withLock('fb:given', () => 'ran', { onBusy: 'throw', fallback: 'busy' })).rejects.toThrow(
        /^Invalid option "withLock options\.fallback": a fallback is only used with onBusy: 'fail-fast', not 'throw': .*Give onBusy: 'fail-fast' with it \(withLock\(key, fn, \{ onBusy: 'fail-fast', fallback \}\)\), or leave the fallback out\./,
      );
    });

    it("is used when 'fail-fast' is the module's default, or given with it", async () => {
      const held = testing.hold('fb:used');
      expect(await service({ onBusy: 'fail-fast' }).withLock('fb:used', () => 'ran', { fallback: 'busy' })).toBe('busy');
      expect(await service().withLock('fb:used', () => 'ran', { onBusy: 'fail-fast', fallback: 'busy' })).toBe('busy');
      held.release();
    });
  });

  describe("@Locked with a fallback and no onBusy, under a module whose default onBusy is not 'fail-fast'", () => {
    const apps: INestApplicationContext[] = [];
    afterEach(async () => {
      await Promise.all(apps.splice(0).map((a) => a.close()));
    });

    /** The error the application's startup ends with, or its context when it started. */
    async function boot(lockModule: DynamicModule, providers: unknown[]): Promise<INestApplicationContext | { failed: unknown }> {
      @Module({ imports: [lockModule], providers: providers as never[] })
      class AppModule {}
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      moduleRef.useLogger(false);
      try {
        const app = await moduleRef.init();
        apps.push(app);
        return app;
      } catch (error) {
        await moduleRef.close().catch(() => undefined);
        return { failed: error };
      }
    }

    it.each([
      ["'throw'", { onBusy: 'throw' as const }, /'throw', under which a busy key rejects with LockBusyError/],
      ["'retry' (the built-in default)", {}, /'retry', under which a busy key is waited for/],
    ])('fails the startup when the default is %s (before: it started, and each busy call threw or waited instead)', async (_, options, why) => {
      const started = await boot(DistributedLockTestingModule.forRoot(options), [Ticks]);
      expect(started).toHaveProperty('failed');
      const { failed } = started as { failed: unknown };
      expect(failed).toBeInstanceOf(LockOptionsError);
      expect((failed as LockOptionsError).option).toBe('@Locked on Ticks.tick options.fallback');
      expect((failed as Error).message).toMatch(why);
      expect((failed as Error).message).toMatch(/Give onBusy: 'fail-fast' with it: @Locked\(keys, \{ onBusy: 'fail-fast', fallback \}\)\.$/);
    });

    it('fails the startup for an inherited method too', async () => {
      const started = await boot(DistributedLockTestingModule.forRoot({ onBusy: 'throw' }), [NightlyTicks]);
      expect((started as { failed: unknown }).failed).toBeInstanceOf(LockOptionsError);
    });

    it("fails the startup for a transient provider's instances (one per consumer, made at startup)", async () => {
      const started = await boot(DistributedLockTestingModule.forRoot({ onBusy: 'throw' }), [TransientTicks, UsesTransientTicks]);
      expect((started as { failed: unknown }).failed).toBeInstanceOf(LockOptionsError);
      expect(((started as { failed: unknown }).failed as LockOptionsError).option).toBe('@Locked on TransientTicks.tick options.fallback');
    });

    it("starts, and a busy key resolves to the fallback, when the module's default is 'fail-fast'", async () => {
      const app = (await boot(DistributedLockTestingModule.forRoot({ onBusy: 'fail-fast' }), [Ticks, FailFastTicks])) as INestApplicationContext;
      const held = app.get(LockTestingController).hold('fb:tick');
      expect(await app.get(Ticks).tick()).toBe('skipped');
      expect(app.get(Ticks).runs).toBe(0);
      held.release();
      expect(await app.get(Ticks).tick()).toBe('ran');
    });

    it('an onBusy given beside the fallback is what counts, whatever the module default', async () => {
      const app = (await boot(DistributedLockTestingModule.forRoot({ onBusy: 'throw' }), [FailFastTicks])) as INestApplicationContext;
      const held = app.get(LockTestingController).hold('fb:explicit');
      expect(await app.get(FailFastTicks).tick()).toBe('skipped');
      held.release();
    });

    it('a request-scoped instance (made per request, after startup) is refused at its call, naming the method; the method does not run', async () => {
      const app = (await boot(DistributedLockTestingModule.forRoot({ onBusy: 'throw' }), [RequestTicks])) as INestApplicationContext;
      const ticks = await app.resolve(RequestTicks, ContextIdFactory.create());
      await expect(ticks.tick()).rejects.toThrow(
        /^Invalid option "@Locked on RequestTicks\.tick options\.fallback": .*module's default applies: 'throw'/,
      );
      expect(RequestTicks.runs).toBe(0);
    });
  });
});
