import { LockOptionsError } from '../errors/lock-options.error';

/**
 * `imports: [DistributedLockModule]`, the class without `forRoot`, is a new user's first mistake: the class's
 * providers then have no options, and Nest failed the startup with "Nest can't resolve dependencies of the
 * LockService (?, …)" naming DISTRIBUTED_LOCK_MODULE_OPTIONS, which says nothing of forRoot. The options are
 * injected `@Optional()` so that their absence reaches this, which says what to import.
 */
export function assertModuleOptionsGiven(options: unknown): void {
  if (options !== undefined) return;
  throw new LockOptionsError(
    'forRoot',
    'the lock module has no options: it was imported as a class. Import DistributedLockModule.forRoot({ redis: "redis://…" }) ' +
      'or DistributedLockModule.forRootAsync({ … }) instead of DistributedLockModule (in tests, DistributedLockTestingModule.forRoot({})); ' +
      'outside Nest, pass them: new LockService({ redis: "redis://…" }).',
  );
}
