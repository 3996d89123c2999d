import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { LockService } from '../lock.service';
import { HAS_LOCKED_METHODS, LOCK_SERVICE_REF } from './locked.internal-constants';
import { assertLockedOutermost } from './outer-wrapper-check';

/**
 * Attaches this application's `LockService` to every provider and controller instance whose class
 * has `@Locked` methods, so the wrapper finds it on `this` at call time. Runs in `onModuleInit` of
 * the (global by default, hence first-initialised) lock module, before schedulers, event listeners
 * and servers start calling methods.
 */
@Injectable()
export class LockedExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly locks: LockService,
  ) {}

  onModuleInit(): void {
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      for (const instance of instancesOf(wrapper)) {
        if (Reflect.hasMetadata(HAS_LOCKED_METHODS, instance)) {
          assertLockedOutermost(instance);
          Object.defineProperty(instance, LOCK_SERVICE_REF, { value: this.locks, enumerable: false, configurable: true, writable: true });
        }
      }
    }
  }
}

function instancesOf(wrapper: InstanceWrapper): object[] {
  const candidates: unknown[] = [wrapper.instance];
  if (wrapper.isTransient) candidates.push(...wrapper.getStaticTransientInstances().map((i): unknown => i?.instance));
  return candidates.filter((i): i is object => i !== null && typeof i === 'object');
}
