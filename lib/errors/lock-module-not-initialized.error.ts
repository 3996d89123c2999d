import { DistributedLockError } from './distributed-lock.error';

/**
 * A `@Locked` method was called before the application was initialised: `DistributedLockModule` is
 * imported, but Nest has not run its startup yet (`compile()` without `init()`, `NestFactory.create()`
 * before `listen()`, a constructor). The method was not run.
 */
export class LockModuleNotInitializedError extends DistributedLockError {
  constructor(
    /** The method, as `@Locked on Class.method`. */
    readonly method: string,
  ) {
    super(
      `${method} was called before the application was initialised: DistributedLockModule is imported, but its startup ` +
        `(onModuleInit) has not run yet, so the method was not run. Call "await app.init()" or "await app.listen(...)" first; ` +
        `in tests, "await moduleRef.init()" after "compile()". Constructors, and onModuleInit hooks that run before ` +
        `DistributedLockModule's, are too early as well.`,
    );
  }
}
