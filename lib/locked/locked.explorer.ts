import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { LOCKED_LOCK_SERVICE, type LockedLockService } from './lock-service-injection';
import { moduleClosed, moduleCompiled, moduleStarted } from './locked-readiness';
import { HAS_LOCKED_METHODS, LOCK_SERVICE_REF } from './locked.internal-constants';
import { assertLockedOutermost } from './outer-wrapper-check';
import { assertFallbacksUsed } from './fallback-policy-check';

/**
 * Opens `@Locked` calls of this application once its lock module starts (`onModuleInit` of the
 * global, hence first-initialised, module: before schedulers, event listeners and servers call
 * methods). Nest injects the `LockService` into every instance of a class with `@Locked` methods,
 * whatever its scope (lock-service-injection.ts), the one its module sees; the explorer only attaches
 * its own to the instances the injector did not build (factory and value providers) or could not
 * reach (a class in a module that does not see a non-global lock module).
 */
@Injectable()
export class LockedExplorer implements OnModuleInit, OnModuleDestroy {
  constructor(
    private readonly discovery: DiscoveryService,
    @Inject(LOCKED_LOCK_SERVICE) private readonly locks: LockedLockService,
  ) {
    moduleCompiled(this);
  }

  onModuleInit(): void {
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      for (const instance of instancesOf(wrapper)) {
        if (!Reflect.hasMetadata(HAS_LOCKED_METHODS, instance)) continue;
        assertLockedOutermost(instance);
        // What Nest injected stays: with two lock modules (a global one and a feature's own), each class
        // uses the one its module sees, as its constructor's LockService does. Only an instance nobody
        // injected (a factory or value provider, a class whose module sees no lock module) gets this one:
        // the first module to start attaches it.
        const injected = (instance as Record<symbol, unknown>)[LOCK_SERVICE_REF] as LockedLockService | undefined;
        if (injected === undefined) {
          Object.defineProperty(instance, LOCK_SERVICE_REF, { value: this.locks, enumerable: false, configurable: true, writable: true });
        }
        // A placeholder's calls are made on per-request (or per-consumer) instances, each injected with the
        // service its module sees, which may not be this one: those are checked per call (locked-invocation.ts).
        if (!isPlaceholder(wrapper, instance)) assertFallbacksUsed(instance, injected ?? this.locks);
      }
    }
    moduleStarted(this, this.locks);
  }

  onModuleDestroy(): void {
    moduleClosed(this);
  }
}

/** The instances made at startup (for a request-scoped class, only a placeholder: its instances are made, and injected, per request). */
function instancesOf(wrapper: InstanceWrapper): object[] {
  const candidates: unknown[] = [wrapper.instance];
  if (wrapper.isTransient) candidates.push(...wrapper.getStaticTransientInstances().map((i): unknown => i?.instance));
  return candidates.filter((i): i is object => i !== null && typeof i === 'object');
}

/**
 * Whether `instance` is the object Nest makes (from the prototype, never constructed) for a request-scoped or
 * transient class in place of the instances it makes per request or per consumer.
 */
function isPlaceholder(wrapper: InstanceWrapper, instance: object): boolean {
  return instance === wrapper.instance && (wrapper.isTransient || !wrapper.isDependencyTreeStatic());
}
