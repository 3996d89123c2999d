import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { LockDeferCoordinator } from './lock-defer.coordinator';
import { LockService } from './lock.service';

/**
 * A lock module's shutdown, first part: on `onModuleDestroy`, no new lock (`LockServiceClosedError`), held locks
 * told through their `signal`, and their work waited for up to `shutdownTimeout`; the connections close in
 * `onApplicationShutdown` (LockService, LockDeferCoordinator).
 *
 * Why this phase: Nest's `app.close()` runs onModuleDestroy, then beforeApplicationShutdown, then closes the
 * HTTP server, then onApplicationShutdown, each phase module by module, and a global module (this one, by
 * default) among the last of every phase. Drained in onApplicationShutdown, locked work was told to stop only
 * after the other modules' onApplicationShutdown had closed their connections (a database pool: the work's
 * commit failed), or not, depending on import order, and new locks were granted all through the earlier
 * phases. Drained here, it is over before every beforeApplicationShutdown and onApplicationShutdown, whatever
 * the order, and before the onModuleDestroy of modules that come after this one (see docs/operations.md).
 */
@Injectable()
export class LockModuleDrain implements OnModuleDestroy {
  constructor(
    private readonly locks: LockService,
    private readonly deferral: LockDeferCoordinator,
  ) {}

  async onModuleDestroy(): Promise<void> {
    // The worker first: a deferred run still waiting for its lock goes back to its queue unrun, rather than
    // failing an attempt when the lock service ends its wait. Both drains share shutdownTimeout.
    const worker = this.deferral.closeWorker();
    // A test double in place of the LockService (overrideProvider(LockService).useValue(...)) has no engine,
    // and nothing of the module's to drain: a shutdown hook that threw on it failed every such test's app.close().
    const engine = (this.locks as Partial<LockService>).engine;
    await Promise.all([worker, engine?.drainLocks()]);
  }
}
