/**
 * Mutual-exclusion contender (T1, T8): one OS process with its own LockService, hammering one key.
 * Inside each section it does a deliberately non-atomic read-sleep-write of a shared counter through
 * a separate plain ioredis client, so any overlap of two sections loses an increment. The lock may
 * reach Redis through a (slow) proxy while the counter is read over a direct connection: only the
 * lock's traffic then pays the network delay, and every measured acquire latency is the lock's.
 *
 * env: WORKER, KEY, COUNTER_KEY, SECTIONS, and
 * - REDIS_URL, or LOCK_URL (the lock's connection) and DATA_URL (the counter's);
 * - KEY_PREFIX (default 't1:'), TTL (default 5000), WAIT_TIMEOUT (default 30000), COMMAND_TIMEOUT (optional);
 * - HOLD_MS: the sleep between GET and SET (default 0 = one macrotask);
 * - BYPASS=1: negative control, no lock at all, so the checker must see overlaps.
 * Emits {ready}, then one section record per section (with acquireStartAt, the call's start, and
 * heldAtExit), then {done, sections, stats}.
 */
import Redis from 'ioredis';
import { LockService } from '../../../lib';
import { emit, now } from '../../harness/worker-log';
import { sleep } from './support/timing';
import { hammerSettings, parentSaysGo, requiredEnv } from './support/worker-env';

const env = requiredEnv('hammer.worker');
const { worker, key, counterKey, sections, holdMs } = hammerSettings(env, '0');
const bypass = process.env.BYPASS === '1';
const lockUrl = process.env.LOCK_URL ?? env('REDIS_URL');
const dataUrl = process.env.DATA_URL ?? env('REDIS_URL');

async function main(): Promise<void> {
  const data = new Redis(dataUrl, { maxRetriesPerRequest: 1 });
  const locks = new LockService({
    redis: lockUrl,
    keyPrefix: process.env.KEY_PREFIX ?? 't1:',
    ttl: Number(process.env.TTL ?? '5000'),
    waitTimeout: Number(process.env.WAIT_TIMEOUT ?? '30000'),
    ...(process.env.COMMAND_TIMEOUT ? { commandTimeout: Number(process.env.COMMAND_TIMEOUT) } : {}),
  });
  await locks.onModuleInit();
  await data.ping();
  emit({ ready: true, worker });
  // Start together on the parent's word, so the contention is real from the first section.
  await parentSaysGo();
  try {
    for (let i = 0; i < sections; i++) {
      const acquireStartAt = now();
      const lock = bypass ? null : await locks.acquire(key);
      const acquiredAt = now();
      const enterAt = now();
      const seen = Number((await data.get(counterKey)) ?? '0');
      await sleep(holdMs);
      await data.set(counterKey, String(seen + 1));
      // Still inside the lease when leaving? (A section that outlived its lease is not protected.)
      const heldAtExit = lock ? lock.isHeld() : true;
      const exitAt = now();
      const releasedOk = lock ? await lock.release() : true;
      emit({ worker, key, token: lock?.token, fence: lock?.fencingToken, acquireStartAt, acquiredAt, enterAt, exitAt, heldAtExit, releasedOk });
    }
    emit({ done: true, worker, sections, stats: locks.getStats() });
  } finally {
    await locks.close();
    data.disconnect();
    process.disconnect?.();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`hammer.worker ${worker} failed: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exitCode = 1;
});
