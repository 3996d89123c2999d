/**
 * T1 contender: one OS process with its own LockService, hammering one key. Inside each section it
 * does a deliberately non-atomic read-sleep-write of a shared counter through a separate plain
 * ioredis client, so any overlap of two sections loses an increment.
 *
 * env: REDIS_URL, WORKER, KEY, COUNTER_KEY, SECTIONS, HOLD_MS (the sleep between GET and SET; 0 =
 * one macrotask), BYPASS=1 (negative control: no lock at all, so the checker must see overlaps).
 * Emits one section record per section, then {done, sections}.
 */
import Redis from 'ioredis';
import { LockService } from '../../../lib';
import { emit, now } from '../../harness/worker-log';
import { sleep } from './support/timing';
import { hammerSettings, parentSaysGo, requiredEnv } from './support/worker-env';

const env = requiredEnv('hammer.worker');
const { worker, key, counterKey, sections, holdMs } = hammerSettings(env, '0');
const bypass = process.env.BYPASS === '1';

async function main(): Promise<void> {
  const data = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
  const locks = new LockService({ redis: env('REDIS_URL'), keyPrefix: 't1:', ttl: 5_000, waitTimeout: 30_000 });
  await locks.onModuleInit();
  await data.ping();
  emit({ ready: true, worker });
  // Start together on the parent's word, so the contention is real from the first section.
  await parentSaysGo();
  try {
    for (let i = 0; i < sections; i++) {
      const lock = bypass ? null : await locks.acquire(key);
      const acquiredAt = now();
      const enterAt = now();
      const seen = Number((await data.get(counterKey)) ?? '0');
      await sleep(holdMs);
      await data.set(counterKey, String(seen + 1));
      const exitAt = now();
      const releasedOk = lock ? await lock.release() : true;
      emit({ worker, key, token: lock?.token, fence: lock?.fencingToken, acquiredAt, enterAt, exitAt, releasedOk });
    }
    emit({ done: true, worker, sections });
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
