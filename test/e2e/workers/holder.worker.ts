/**
 * A lock holder in its own process, for the tests that SIGSTOP or kill -9 it (T2, T3) or kill it
 * while it is still queued as a waiter (dead-waiter test).
 *
 * It acquires KEY, optionally writes to a fenced store, then "works": an async loop of short sleeps
 * that logs a tick each time and stops as soon as `lock.signal` reports the lease lost. Afterwards
 * it does what a stale holder might do — extend, write with its old fence, release — and reports
 * each outcome, so the parent can check the library refused all of it.
 *
 * env: REDIS_URL, KEY, TTL, KEY_PREFIX (default 'e2e:'), STORE_KEY (optional fenced store hash),
 * TICK_MS (default 5), WAIT_TIMEOUT, WAITER_LEASE (optional).
 * Lines: ready, acquired {token, fence}, write {accepted}, entered, tick {at}, aborted {at, name,
 * reason}, noticed {isHeld}, extend {ok, name}, late-write {accepted}, released {result}, closed.
 */
import Redis from 'ioredis';
import { LockLostError, LockService } from '../../../lib';
import { emit, now } from '../../harness/worker-log';
import { fencedWrite } from './support/fenced-store';
import { sleep } from './support/timing';
import { requiredEnv } from './support/worker-env';

const env = requiredEnv('holder.worker');

const key = env('KEY');
const storeKey = process.env.STORE_KEY;
const tickMs = Number(process.env.TICK_MS ?? '5');

async function main(): Promise<void> {
  const data = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
  const locks = new LockService({
    redis: env('REDIS_URL'),
    keyPrefix: process.env.KEY_PREFIX ?? 'e2e:',
    ttl: Number(env('TTL')),
    waitTimeout: Number(process.env.WAIT_TIMEOUT ?? '30000'),
    ...(process.env.WAITER_LEASE ? { waiterLease: Number(process.env.WAITER_LEASE) } : {}),
  });
  await locks.onModuleInit();
  await data.ping();
  emit({ event: 'ready', at: now() });

  const lock = await locks.acquire(key);
  emit({ event: 'acquired', at: now(), token: lock.token, fence: lock.fencingToken });
  // Stamp the abort the moment the library fires it, not when the work loop gets round to looking.
  lock.signal.addEventListener('abort', () => {
    const reason = lock.signal.reason as Error;
    emit({
      event: 'aborted',
      at: now(),
      name: reason?.name,
      reason: reason instanceof LockLostError ? reason.reason : undefined,
    });
  });
  if (storeKey) emit({ event: 'write', at: now(), accepted: await fencedWrite(data, storeKey, lock.fencingToken, `first:${lock.fencingToken}`) });
  emit({ event: 'entered', at: now() });

  // The guarded work: an async wait in small steps, the way a job polls something between writes.
  for (;;) {
    await sleep(tickMs);
    emit({ event: 'tick', at: now() });
    if (lock.signal.aborted) break;
  }
  emit({ event: 'noticed', at: now(), isHeld: lock.isHeld() });

  try {
    await lock.extend();
    emit({ event: 'extend', at: now(), ok: true });
  } catch (error) {
    const e = error as Error;
    emit({ event: 'extend', at: now(), ok: false, name: e.name, reason: e instanceof LockLostError ? e.reason : undefined });
  }
  if (storeKey) {
    // A holder that ignores the signal and writes anyway: only the fence can stop this write.
    emit({ event: 'late-write', at: now(), accepted: await fencedWrite(data, storeKey, lock.fencingToken, `late:${lock.fencingToken}`) });
  }
  emit({ event: 'released', at: now(), result: await lock.release() });
  await locks.close();
  data.disconnect();
  emit({ event: 'closed', at: now() });
}

main().catch((error: unknown) => {
  process.stderr.write(`holder.worker failed: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exitCode = 1;
});
