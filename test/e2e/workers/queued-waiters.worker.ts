/**
 * Many waiters in one process, for the dead-waiters test: queues WAITERS acquisitions of KEY behind
 * its holder and then just waits (refreshing their places) until the parent kills it with -9.
 *
 * env: REDIS_URL (or NODES, comma-separated Redlock node URLs), KEY, KEY_PREFIX, WAITERS, WAITER_LEASE.
 * Lines: ready, queued {count} (every acquire was sent), acquired (must never happen: the key stays held).
 */
import { LockService } from '../../../lib';
import { emit, now } from '../../harness/worker-log';
import { requiredEnv } from './support/worker-env';

const env = requiredEnv('queued-waiters.worker');

async function main(): Promise<void> {
  const nodes = process.env.NODES?.split(',');
  const locks = new LockService({
    ...(nodes ? { nodes, nodeRecoveryDelay: 0 } : { redis: env('REDIS_URL') }),
    keyPrefix: env('KEY_PREFIX'),
    waiterLease: Number(env('WAITER_LEASE')),
    waitTimeout: 600_000,
    // Not an interesting number here; only the queue places matter.
    commandTimeout: 10_000,
  });
  await locks.onModuleInit();
  emit({ event: 'ready', at: now() });
  const count = Number(env('WAITERS'));
  for (let i = 0; i < count; i++) {
    locks.acquire(env('KEY')).then(
      () => emit({ event: 'acquired', at: now() }),
      (error: Error) => emit({ event: 'failed', at: now(), message: error.message }),
    );
  }
  emit({ event: 'queued', at: now(), count });
}

main().catch((error: unknown) => {
  process.stderr.write(`queued-waiters.worker failed: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exitCode = 1;
});
