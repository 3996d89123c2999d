import type { LockBackendFactory } from '../core/lock-backend';
import type { MemoryLockSpace } from './memory-lock-space';
import { MemoryLockStore } from './memory-lock-store';

/** A backend on `space`: nothing to connect, confirm or close but the service's wake channel. */
export function memoryBackend(space: MemoryLockSpace): LockBackendFactory {
  return ({ settings, serviceId }) => {
    const wakeChannel = space.subscribe(serviceId);
    return {
      store: new MemoryLockStore(space, settings.waiterLease),
      wakeChannel,
      // No replicas: replicaAcks has nothing to wait for.
      confirmsHandovers: false,
      ready: () => Promise.resolve(),
      close: () => wakeChannel.close(),
    };
  };
}
