import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown, OnModuleInit, Optional } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { DEFER_QUEUE_FACTORY, type DeferJobQueue, type DeferQueueFactory } from './defer/defer-job-queue';
import { assertDeferConnectionSupported } from './defer/defer-connection-support';
import { attachDeferQueue } from './defer/defer-queue';
import { deferTargetOf } from './defer/defer-target';
import { DeferTargets } from './defer/defer-targets';
import { deferredMethodsOf } from './defer/deferred-methods';
import { resolveDeferOptions } from './defer/resolve-defer-options';
import { DISTRIBUTED_LOCK_OPTIONS } from './distributed-lock.module-definition';
import { DistributedLockError } from './errors/distributed-lock.error';
import { LockService } from './lock.service';
import { LOCK_SERVICE_REF } from './locked/locked.internal-constants';
import type { DistributedLockModuleOptions } from './options/distributed-lock-module-options.interface';
import type { ResolvedDeferOptions } from './options/defer-options.interface';
import { assertModuleOptionsGiven } from './options/module-options-given';

/** DistributedLockModule's queues: BullMQ, loaded only when a module has a `defer` option (bullmq is an optional peer). */
const BULLMQ_DEFER_QUEUES: DeferQueueFactory = {
  moduleName: 'DistributedLockModule',
  create: (context) =>
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- lazy: bullmq (optional peer) is loaded only with a defer option
    (require('./defer/bullmq-defer-queue') as typeof import('./defer/bullmq-defer-queue')).BullmqDeferQueue.create(context),
};

/**
 * Wires `@Locked(…, { onBusy: 'defer' })` to a queue when the module has a `defer` option (validated here,
 * at startup, whatever the queue): attaches the queue to this application's LockService at init, starts the
 * worker over the deferring methods of singleton providers and controllers (by `ProviderClass.method`) once the
 * application is up; at shutdown its worker drains with the lock service's locks (lock-module-drain.ts) and the
 * queue closes alongside the lock service's connections. The queue is BullMQ's unless the module provides another
 * (DEFER_QUEUE_FACTORY: the testing module's runs jobs in process).
 */
@Injectable()
export class LockDeferCoordinator implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly settings?: ResolvedDeferOptions;
  private queue?: DeferJobQueue;
  private readonly queues: DeferQueueFactory;

  constructor(
    private readonly discovery: DiscoveryService,
    // Optional as LockService's: a module imported without forRoot fails saying so, whichever provider Nest builds first.
    @Optional() @Inject(DISTRIBUTED_LOCK_OPTIONS) private readonly options: DistributedLockModuleOptions,
    private readonly locks: LockService,
    // Typed `unknown` like LockService's backend: the public declaration shows users no queue internals.
    @Optional() @Inject(DEFER_QUEUE_FACTORY) queues?: unknown,
  ) {
    assertModuleOptionsGiven(options);
    this.settings = resolveDeferOptions(options.defer);
    this.queues = (queues as DeferQueueFactory | undefined) ?? BULLMQ_DEFER_QUEUES;
  }

  onModuleInit(): void {
    if (!this.settings) return;
    const { engine } = this.locks;
    const limits = { commandTimeout: engine.settings.commandTimeout, shutdownTimeout: engine.settings.shutdownTimeout };
    const { settings, options } = this;
    assertDeferConnectionSupported(options.redis);
    const queue = this.queues.create({ settings, options, limits, metrics: engine.metrics, logger: engine.logger });
    this.queue = queue;
    attachDeferQueue(this.locks, queue);
    // The queue connects at once, and Nest runs no shutdown hook after a failed startup: when the
    // LockService closes, here or because it could not start (Redis unreachable), the queue closes with
    // it, or its connection would keep reconnecting in a process that never started.
    engine.closeSignal.addEventListener('abort', () => void queue.close().catch(() => undefined), { once: true });
  }

  async onApplicationBootstrap(): Promise<void> {
    let targets: DeferTargets;
    try {
      await this.refuseSharedQueue();
      targets = this.findTargets();
    } catch (error) {
      // Startup fails here, and Nest runs no shutdown hook after a failed init: close what the lock
      // module opened (queue, Redis connection), or the process would stay alive on them.
      await this.closeAfterFailedStartup();
      throw error;
    }
    if (targets.size > 0 && !this.queue) {
      await this.locks.close();
      const names = targets.names().join(', ');
      throw new DistributedLockError(
        `${names} use onBusy 'defer', but ${this.queues.moduleName} has no "defer" option: add defer: {} to its forRoot (see docs/defer.md).`,
      );
    }
    // No deferring method here, no worker: it could run none of the queue's jobs, and would take (and fail) those of
    // another application sharing the queue on the same Redis.
    if (this.queue && this.settings?.worker && targets.size > 0) {
      this.queue.startWorker(targets, ({ instance, method }, args, body) =>
        this.locks.withLock(method.keys.resolve(instance, args), body, { ...method.lockOptions, onBusy: 'retry' }),
      );
    }
  }

  /**
   * The module's drain (lock-module-drain.ts) begins here, before the lock service's: the worker stops taking jobs,
   * jobs waiting for their lock go back to the queue, running jobs are told through their lock's signal and finish
   * under their locks, bounded by shutdownTimeout (see DeferJobQueue.closeWorker). The queue stays attached: a call
   * made meanwhile gets the lock service's LockServiceClosedError (503 over HTTP), not "no queue".
   */
  closeWorker(): Promise<void> {
    return this.queue?.closeWorker() ?? Promise.resolve();
  }

  /**
   * Alongside the LockService's close (Nest's last phase, the drain being over): no new lock has been taken since
   * the drain began (LockServiceClosedError, 503 over HTTP), so nothing new reaches the queue; enqueues in flight
   * land, then its connections close.
   */
  async onApplicationShutdown(): Promise<void> {
    await this.queue?.close();
  }

  /** What this module opened (queue, Redis connection), closed when startup fails: Nest runs no shutdown hook then. */
  private async closeAfterFailedStartup(): Promise<void> {
    await this.queue?.close();
    await this.locks.close();
  }

  /**
   * Two lock modules of one application (a feature module with its own, isGlobal: false) deferring on one queue: each
   * worker takes every job of the queue, and one taken by the other module's worker failed there (not its method) or,
   * before targets were filtered by module, ran under that module's LockService, beside a call holding the lock of
   * the module the method belongs to. Refused at startup, naming the queue.
   */
  private async refuseSharedQueue(): Promise<void> {
    const queueName = this.settings?.queueName;
    if (queueName === undefined) return;
    const sharing = this.discovery
      .getProviders()
      .map((wrapper) => wrapper.instance as unknown)
      .filter(
        (other): other is LockDeferCoordinator => other instanceof LockDeferCoordinator && other !== this && other.settings?.queueName === queueName,
      );
    if (sharing.length === 0) return;
    // Startup fails, and Nest runs no shutdown hook after a failed init: the other modules' queues and connections
    // (this one's are closed by the caller) would keep the process alive.
    await Promise.all(sharing.map((other) => other.closeAfterFailedStartup()));
    throw new DistributedLockError(
      `Two ${this.queues.moduleName} imports in this application defer on one queue, "${queueName}": a worker takes every job of ` +
        `its queue, so each module's jobs would reach the other's worker. Give each module's defer option its own queueName.`,
    );
  }

  /**
   * Deferring methods by job name, on the instance the worker runs them on (request-scoped classes are refused): those
   * of classes that lock with this module's LockService. A class under another lock module (a feature module with its
   * own) defers to that module's queue, and its jobs must run under that module's locks.
   */
  private findTargets(): DeferTargets {
    const targets = new DeferTargets();
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      const instance: unknown = wrapper.instance;
      if (instance === null || typeof instance !== 'object') continue;
      const methods = deferredMethodsOf(instance);
      if (methods.length === 0) continue;
      // Read only on classes with deferring methods: another library's proxy provider (nestjs-cls) throws on any
      // property read outside its context.
      const service = (instance as Record<symbol, unknown>)[LOCK_SERVICE_REF];
      if (service !== undefined && service !== this.locks) continue;
      if (!isSingleton(wrapper)) {
        throw new DistributedLockError(
          `${methods[0].where}: onBusy 'defer' needs a singleton provider (the worker runs the job outside any request); ` +
            `this class is request-scoped or transient. Move the method to a singleton service.`,
        );
      }
      for (const method of methods) targets.add(deferTargetOf(instance, method));
    }
    return targets;
  }
}

function isSingleton(wrapper: InstanceWrapper): boolean {
  return wrapper.isDependencyTreeStatic() && !wrapper.isTransient;
}
