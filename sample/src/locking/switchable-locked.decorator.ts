import { Locked, LockedMethodDecorator, LockedOptions, lockKey } from '../../../lib';
import { processMutex } from './in-process-mutex';
import { parseLockMode } from './lock-mode';
import { wrapMethod } from './wrap-method';

/**
 * `@Locked(template, options)` — or, with LOCK_MODE=in-process, the per-process mutex of the
 * incident, on exactly the same keys. The one place where the sample decides how it locks.
 *
 * LOCK_MODE is read when the class is defined (decorators run at import time), i.e. from the
 * process environment, like @Cron's expression; ConfigService validates the same variable at start-up.
 */
export function SwitchableLocked(template: string, options: LockedOptions): LockedMethodDecorator {
  return parseLockMode(process.env.LOCK_MODE) === 'in-process' ? InProcessLocked(template, options) : Locked(template, options);
}

/** Same bound as the module's default waitTimeout (app.module.ts), which @Locked inherits. */
const inProcessWaitMs = (options: LockedOptions) => options.waitTimeout ?? (Number(process.env.CLAIM_WAIT_MS) || 10_000);

function InProcessLocked(template: string, options: LockedOptions): LockedMethodDecorator {
  return (_target, _name, descriptor) => {
    wrapMethod(
      descriptor,
      (original) =>
        async function (this: unknown, ...args: unknown[]) {
          const key = lockKey(template, ...args);
          if (options.onBusy === 'fail-fast') return processMutex.runIfFree(key, () => original.apply(this, args));
          // Its LockTimeoutError becomes a 409 through the lock module's HTTP mapping, like @Locked's.
          return processMutex.runExclusive(key, inProcessWaitMs(options), () => original.apply(this, args));
        },
    );
  };
}
