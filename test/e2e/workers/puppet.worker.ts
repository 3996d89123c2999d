/**
 * A lock client driven one step at a time by the parent (IPC), for fault scenarios that need an
 * exact order of events. Records the event history like history.worker.ts; while it holds a lock it
 * confirms isHeld() every 20 ms, so its hold is placed in time up to the moment it ends.
 *
 * env: REDIS_URL, WORKER, KEY_PREFIX, TTL, WAITER_LEASE, COMMAND_TIMEOUT.
 * Messages: {acquire: key, wait}, {release: true}, {block: ms} (busy-waits inside the message
 * callback: an event loop blocked by CPU work), {close: true}. Answers with {step: ...} lines.
 */
// Leases lost and Redis stopped on purpose: their warnings would only fill the parent's buffer of non-JSON output.
import '../../harness/quiet-logs';
import { Lock, LockService } from '../../../lib';
import { emit, now } from '../../harness/worker-log';
import { HistoryRecorder } from './support/history-recorder';
import { requiredEnv } from './support/worker-env';

const env = requiredEnv('puppet.worker');
const rec = new HistoryRecorder(env('WORKER'));
const locks = new LockService({
  redis: env('REDIS_URL'),
  keyPrefix: env('KEY_PREFIX'),
  ttl: Number(env('TTL')),
  waiterLease: Number(env('WAITER_LEASE')),
  commandTimeout: Number(env('COMMAND_TIMEOUT')),
});
const HELD_CHECK_MS = 20;
let holding: { id: number; lock: Lock; timer: NodeJS.Timeout } | undefined;

async function acquire(key: string, wait: number): Promise<void> {
  const c = rec.invoke('acquire', { keys: [key], policy: 'retry', wait });
  emit({ step: 'acquiring' });
  try {
    const lock = await locks.acquire(key, { waitTimeout: wait });
    rec.grant(c, lock);
    rec.enter(c);
    rec.held(c, lock);
    holding = { id: c, lock, timer: setInterval(() => holding && rec.held(holding.id, holding.lock), HELD_CHECK_MS) };
    emit({ step: 'granted' });
  } catch (error) {
    rec.error(c, error);
    emit({ step: 'failed', error: String(error) });
  }
}

async function release(): Promise<void> {
  if (!holding) return;
  const { id, lock, timer } = holding;
  holding = undefined;
  clearInterval(timer);
  rec.held(id, lock);
  rec.exit(id);
  const r = rec.invoke('release', { lock: id });
  try {
    rec.release(r, await lock.release());
  } catch (error) {
    rec.error(r, error);
  }
  emit({ step: 'released' });
}

function block(ms: number): void {
  const from = now();
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // CPU-bound work: no timer, no socket is served meanwhile.
  }
  emit({ step: 'unblocked', from, to: now() });
}

process.on('message', (m: { acquire?: string; wait?: number; release?: boolean; block?: number; close?: boolean }) => {
  if (m.block) block(m.block);
  else if (m.acquire) void acquire(m.acquire, m.wait ?? 5_000);
  else if (m.release) void release();
  else if (m.close) {
    void (async () => {
      await release();
      await locks.close();
      emit({ step: 'closed' });
      process.disconnect?.();
    })();
  }
});

void locks.onModuleInit().then(() => emit({ ready: true }));
