import { DistributedLockError } from '../errors/distributed-lock.error';
import { isClusterClient } from '../options/redis-client-shape';

/**
 * What `onBusy: 'defer'` can keep its queue on: one Redis (or Sentinel's primary). Checked by the
 * coordinator of both lock modules at startup, so the testing module refuses what production refuses.
 */
export function assertDeferConnectionSupported(redis: unknown): void {
  if (isClusterClient(redis)) {
    throw new DistributedLockError(
      `onBusy 'defer' does not support a Redis Cluster client yet: give DistributedLockModule a single Redis (or Sentinel) for it.`,
    );
  }
}
