/**
 * T15, one fault in an exact order: a waiter whose event loop is blocked (CPU-bound work, a long GC)
 * while the lock is handed to it over pub/sub. The handed lease runs out unused, another process
 * takes the lock, and only then does the waiter run again: its retry timer fires first (a new
 * attempt, answered "busy"), then it reads the handover message it missed. That message is stale:
 * the waiter must not believe it holds the lock. Checked on the event history like every T15 run
 * (overlap of confirmed holds, fence order).
 *
 * On today's main it does believe it: the lease of a handover is dated from the last "busy"
 * attempt, which here was sent after the handover, so the stale grant looks valid (lib/acquire-one-key.ts,
 * waitForTurn: `lastBusySentAt`).
 */
import * as path from 'path';
import type Redis from 'ioredis';
import { checkEventHistory, formatViolations } from '../harness/event-history/check-history';
import { isHistoryEvent } from '../harness/event-history/events';
import { RedisProcess } from '../harness/redis-process';
import { killSurvivors, startWorker, WorkerHandle } from '../harness/worker-process';
import { hrMs, sleep, stampMs } from './workers/support/timing';

const PUPPET = path.join(__dirname, 'workers', 'puppet.worker.ts');
const TTL = 1_000;
const BLOCK_MS = 2_500;
const PREFIX = 'stale:';

describe('T15 a waiter blocked while the lock is handed to it', () => {
  let redis: RedisProcess;
  let client: Redis;
  const puppets: WorkerHandle[] = [];

  beforeAll(async () => {
    redis = await RedisProcess.start();
    client = redis.client();
  });

  afterAll(async () => {
    await Promise.all(puppets.map((p) => p.stop()));
    await redis.stop();
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));

  function puppet(name: string): WorkerHandle {
    const p = startWorker(PUPPET, {
      env: { REDIS_URL: redis.url, WORKER: name, KEY_PREFIX: PREFIX, TTL: String(TTL), WAITER_LEASE: '3000', COMMAND_TIMEOUT: '1000' },
    });
    puppets.push(p);
    return p;
  }
  const step = (p: WorkerHandle, name: string, ms = 5_000) => p.waitFor((l) => l.step === name, ms);

  it('does not take the stale handover for a grant once it runs again: 0 overlaps, 0 fence inversions', async () => {
    const [holder, waiter, other] = [puppet('holder'), puppet('waiter'), puppet('other')];
    await Promise.all([holder, waiter, other].map((p) => p.waitFor((l) => l.ready === true, 10_000)));

    await holder.send({ acquire: 'k', wait: 1_000 });
    await step(holder, 'granted');
    await waiter.send({ acquire: 'k', wait: 10_000 });
    // Queued, and subscribed to its wake channel (the first wait subscribes).
    await sleep(300);
    expect(await client.llen(`${PREFIX}{k}:q`)).toBe(1);

    await waiter.send({ block: BLOCK_MS });
    await sleep(50);
    await holder.send({ release: true });
    await step(holder, 'released');
    // Fault check: the release handed the lock to the (blocked) waiter instead of freeing it.
    const handedFor = await client.pttl(`${PREFIX}{k}`);
    expect(handedFor).toBeGreaterThan(0);
    expect(handedFor).toBeLessThanOrEqual(TTL);

    // The handed lease runs out unused; another process takes the lock while the waiter is still blocked.
    await sleep(handedFor + 100);
    const otherAsked = hrMs();
    await other.send({ acquire: 'k', wait: 5_000 });
    await step(other, 'granted');
    const unblocked = await step(waiter, 'unblocked', 10_000);
    // Fault check: the waiter really was blocked all along, and other got the lock during the block.
    expect(stampMs(unblocked.to) - stampMs(unblocked.from)).toBeGreaterThanOrEqual(BLOCK_MS);
    expect(otherAsked).toBeLessThan(stampMs(unblocked.to));

    const outcome = await waiter.waitFor((l) => l.step === 'granted' || l.step === 'failed', 15_000);
    await sleep(300);
    await other.send({ release: true });
    await step(other, 'released');
    for (const p of [holder, waiter, other]) await p.send({ close: true });
    await Promise.all([holder, waiter, other].map((p) => p.exited));

    const events = [holder, waiter, other].flatMap((p) => p.lines.filter(isHistoryEvent));
    const check = checkEventHistory(events, {
      bounds: { commandTimeoutMs: 1_000, shutdownTimeoutMs: 5_000, slackMs: 250 },
      pauses: [],
      killed: new Set(),
    });
    console.log(`T15 stale handover: waiter ${outcome.step}; ${check.holdViolations.length} hold violations\n${formatViolations(check)}`);
    expect(formatViolations(check)).toBe('');
  }, 60_000);
});
