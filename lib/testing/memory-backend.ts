import type { LockBackendFactory } from '../core/lock-backend';
import { assertRedisOption } from '../options/connection-option';
import { resolveRedlockSettings } from '../options/redlock-options';
import type { MemoryLockSpace } from './memory-lock-space';
import { MemoryLockStore } from './memory-lock-store';

/** A backend on `space`: nothing to connect, confirm or close but the service's wake channel. */
export function memoryBackend(space: MemoryLockSpace): LockBackendFactory {
  return ({ options, settings, serviceId }) => {
    // redis and nodes name nothing here, but are refused as the Redis backends refuse them: a test
    // must not pass with options that fail production's startup.
    // With `nodes`, leases longer than nodeRecoveryDelay are refused per call too, as RedlockStore refuses them.
    const leaseLimit = options.nodes !== undefined ? resolveRedlockSettings(options, settings).nodeRecoveryDelay : 0;
    if (options.nodes === undefined) assertRedisOption(options, settings, 'optional');
    const wakeChannel = space.subscribe(serviceId);
    return {
      store: new MemoryLockStore(space, settings.keyPrefix, settings.waiterLease, leaseLimit),
      wakeChannel,
      // No replicas: replicaAcks has nothing to wait for.
      confirmsHandovers: false,
      location: space.location,
      ready: () => Promise.resolve(),
      close: () => wakeChannel.close(),
    };
  };
}
