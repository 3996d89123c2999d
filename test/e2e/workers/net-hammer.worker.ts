/**
 * T8 contender: one OS process whose LockService reaches Redis through its own (slow) TCP proxy,
 * while the shared counter it guards is read and written over a direct connection. Only the lock's
 * traffic pays the network delay, so every measured acquire latency is the lock's, and a section
 * stays short: any overlap of two sections loses an increment of the counter.
 *
 * env: LOCK_URL (the proxy), DATA_URL (Redis itself), WORKER, KEY, COUNTER_KEY, SECTIONS, TTL,
 * COMMAND_TIMEOUT, WAIT_TIMEOUT, HOLD_MS (sleep between GET and SET of the counter).
 * Emits {ready}, then one section record per section (with acquireStartAt, the call's start), then
 * {done, sections}.
 */
import Redis from 'ioredis';
import { LockService } from '../../../lib';
import { emit, now } from '../../harness/worker-log';
import { sleep } from './support/timing';
import { hammerSettings, parentSaysGo, requiredEnv } from './support/worker-env';

const env = requiredEnv('net-hammer.worker');
const { worker, key, counterKey, sections, holdMs } = hammerSettings(env, '20');

async function main(): Promise<void> {
  const data = new Redis(env('DATA_URL'), { maxRetriesPerRequest: 1 });
  const locks = new LockService({
    redis: env('LOCK_URL'),
    keyPrefix: 't8:',
    ttl: Number(env('TTL')),
    commandTimeout: Number(env('COMMAND_TIMEOUT')),
    waitTimeout: Number(env('WAIT_TIMEOUT')),
  });
  await locks.onModuleInit();
  await data.ping();
  emit({ ready: true, worker });
  await parentSaysGo();
  try {
    for (let i = 0; i < sections; i++) {
      const acquireStartAt = now();
      const lock = await locks.acquire(key);
      const acquiredAt = now();
      const enterAt = now();
      const seen = Number((await data.get(counterKey)) ?? '0');
      await sleep(holdMs);
      await data.set(counterKey, String(seen + 1));
      // Still inside the lease when leaving? (A section that outlived its lease is not protected.)
      const heldAtExit = lock.isHeld();
      const exitAt = now();
      const releasedOk = await lock.release();
      emit({ worker, key, token: lock.token, fence: lock.fencingToken, acquireStartAt, acquiredAt, enterAt, exitAt, heldAtExit, releasedOk });
    }
    emit({ done: true, worker, sections, stats: locks.getStats() });
  } finally {
    await locks.close();
    data.disconnect();
    process.disconnect?.();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`net-hammer.worker ${worker} failed: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exitCode = 1;
});
