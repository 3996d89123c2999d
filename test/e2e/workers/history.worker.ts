/**
 * T12/T15 contender: one OS process, one LockService (replaced by a fresh one after each planned
 * close()), several lanes hammering overlapping key sets with every policy, nested reentrant
 * withLock calls and waits that expire in the queue, recording every call as an event history
 * (support/history-recorder.ts) for the parent's checker. The body does no shared-state work: the
 * history itself (grant, last confirmed isHeld(), fences) is what is checked.
 *
 * With `bypass` in the plan there is no lock at all (negative control, support/bypass-locks.ts).
 *
 * env: PLAN (JSON WorkerPlan, support/history-plan.ts). Emits {ready}, waits for the parent's go,
 * then history events, then {done, worker, sections, calls, outcomes, stats}.
 */
// Leases lost and Redis stopped on purpose: their warnings would only fill the parent's buffer of non-JSON output.
import '../../harness/quiet-logs';
import { Lock, LockService, WithLockOptions } from '../../../lib';
import type { Policy } from '../../harness/event-history/events';
import { emit } from '../../harness/worker-log';
import { bypassLocks } from './support/bypass-locks';
import { HistoryRecorder } from './support/history-recorder';
import { POLICIES, WorkerPlan } from './support/history-plan';
import { SeededRandom } from './support/seeded-random';
import { sleep } from './support/timing';
import { parentSaysGo, requiredEnv } from './support/worker-env';

const plan = JSON.parse(requiredEnv('history.worker')('PLAN')) as WorkerPlan;
const rec = new HistoryRecorder(plan.worker);
const random = new SeededRandom(plan.seed);
/** withLock's fallback when fail-fast finds the key busy. */
const BUSY = Symbol('busy');

/** withLock options for a policy: the fallback only with 'fail-fast', the one policy that uses it (any other refuses it). */
const withLockOptions = (policy: Policy, wait: number): WithLockOptions<typeof BUSY> =>
  policy === 'fail-fast' ? { onBusy: policy, waitTimeout: wait, fallback: BUSY } : { onBusy: policy, waitTimeout: wait };

let sections = 0;
const closeAt = [...plan.closeAt].sort((a, b) => a - b);

async function startService(): Promise<LockService> {
  if (plan.bypass) return bypassLocks();
  const { url, ...options } = plan.service;
  const locks = new LockService({ redis: url, ...options, waitTimeout: plan.waitMs });
  await locks.onModuleInit();
  return locks;
}

/** The process's current LockService; restart() closes it (recorded as a call) and starts a new one. */
let current: Promise<LockService>;

function restartService(): void {
  const old = current;
  current = (async () => {
    const locks = await old;
    const c = rec.invoke('close');
    try {
      await locks.close();
      rec.settle(c, 'closed');
    } catch (error) {
      rec.error(c, error);
    }
    return startService();
  })();
}

function pickCall(): { keys: string[]; policy: Policy; wait: number } {
  const single = (): string => random.pick(plan.cold.length === 0 || random.chance(plan.hotShare) ? plan.hot : plan.cold);
  const keys = random.chance(plan.multiShare) && plan.multis.length > 0 ? random.shuffled(random.pick(plan.multis)) : [single()];
  const policy = POLICIES[random.weighted(plan.policyWeights)];
  const wait = random.chance(plan.shortWaitShare) ? plan.shortWaitMs : plan.waitMs;
  return { keys, policy, wait };
}

const work = (): Promise<void> =>
  plan.bodyMaxMs > 0 ? sleep(random.next() * plan.bodyMaxMs) : new Promise<void>((resolve) => setImmediate(resolve));

/** What runs under a top-level lock. `nest`: the LockService to take keys again through (withLock bodies only). */
async function body(id: number, lock: Lock, keys: string[], nest?: LockService): Promise<void> {
  rec.enter(id);
  if (closeAt.length > 0 && sections >= closeAt[0]) {
    closeAt.shift();
    // Mid-hold on purpose: the body goes on while its service shuts down.
    restartService();
  }
  await work();
  if (nest && random.chance(plan.nestedShare)) await nested(nest, id, keys);
  rec.held(id, lock);
  rec.exit(id);
  sections++;
}

/** A reentrant withLock on the same keys (or some of them) inside a withLock body: must not wait. */
async function nested(locks: LockService, parent: number, keys: string[]): Promise<void> {
  const some = random.shuffled(keys).slice(0, random.int(1, keys.length));
  const { policy, wait } = pickCall();
  const c = rec.invoke('acquire', { keys: some, policy, wait, parent });
  let r: number | undefined;
  try {
    const result = await locks.withLock(
      some,
      async (lock) => {
        rec.grant(c, lock);
        rec.enter(c);
        await work();
        rec.held(c, lock);
        rec.exit(c);
        r = rec.invoke('release', { lock: c });
      },
      withLockOptions(policy, wait),
    );
    if (result === BUSY) rec.settle(c, 'busy');
    else rec.release(r!, null);
  } catch (error) {
    rec.error(c, error);
  }
}

async function viaAcquire(locks: LockService, keys: string[], policy: Policy, wait: number): Promise<void> {
  const c = rec.invoke('acquire', { keys, policy, wait });
  let lock: Lock | null;
  try {
    lock = await locks.acquire(keys, { onBusy: policy, waitTimeout: wait });
  } catch (error) {
    rec.error(c, error);
    return;
  }
  if (!lock) return rec.settle(c, 'busy');
  rec.grant(c, lock);
  await body(c, lock, keys);
  const r = rec.invoke('release', { lock: c });
  try {
    rec.release(r, await lock.release());
  } catch (error) {
    rec.error(r, error);
  }
}

async function viaWithLock(locks: LockService, keys: string[], policy: Policy, wait: number): Promise<void> {
  const c = rec.invoke('acquire', { keys, policy, wait });
  // withLock releases after the callback returns: that release is its own call, result not visible.
  let r: number | undefined;
  try {
    const result = await locks.withLock(
      keys,
      async (lock) => {
        rec.grant(c, lock);
        await body(c, lock, keys, locks);
        r = rec.invoke('release', { lock: c });
      },
      withLockOptions(policy, wait),
    );
    if (result === BUSY) rec.settle(c, 'busy');
    else rec.release(r!, null);
  } catch (error) {
    // The body never throws, and withLock only logs a failed release: this is the acquisition failing.
    rec.error(c, error);
  }
}

async function lane(): Promise<void> {
  while (sections < plan.sections) {
    const locks = await current;
    const { keys, policy, wait } = pickCall();
    const failuresBefore = rec.failures;
    if (random.chance(plan.withLockShare)) await viaWithLock(locks, keys, policy, wait);
    else await viaAcquire(locks, keys, policy, wait);
    // A call that failed without touching the network (no connection: ioredis rejects at once) must
    // not be retried in a microtask-only loop: that starves timers and sockets, so the client could
    // never reconnect. Back off a few ms, as a real caller would.
    if (rec.failures > failuresBefore) await sleep(random.int(1, 10));
  }
}

async function main(): Promise<void> {
  current = startService();
  await current;
  emit({ ready: true, worker: plan.worker, pid: process.pid });
  await parentSaysGo();
  await Promise.all(Array.from({ length: plan.lanes }, () => lane()));
  const locks = await current;
  const stats = locks.getStats();
  const c = rec.invoke('close');
  await locks.close();
  rec.settle(c, 'closed');
  emit({ done: true, worker: plan.worker, sections, calls: rec.calls, outcomes: rec.outcomes, stats });
  process.disconnect?.();
}

main().catch((error: unknown) => {
  process.stderr.write(`history.worker ${plan.worker} failed: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exitCode = 1;
});
