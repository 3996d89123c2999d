/**
 * Pieces the fault suites (Redis frozen or killed, slow Redis, network faults) all need: catching
 * unhandled rejections, starting services that the suite closes afterwards, and waiting for the
 * library to work again once a fault is gone. One copy here, so every suite checks the same way.
 */
import * as vm from 'vm';
import { DistributedLockModuleOptions, Lock, LockConnectionError, LockService } from '../../../../lib';
import type Redis from 'ioredis';
import { RedisProcess, killSurvivors } from '../../../harness/redis-process';
import { SettleTracker } from './settle-tracker';
import { hrMs, sleep, timed, TimerLateness } from './timing';

// jest gives each test file a copy of `process` whose listeners never see unhandled rejections;
// the real process object does (the same trick the harness reaper uses).
const realProcess = vm.runInThisContext('process') as NodeJS.Process;

/** Collects every unhandled rejection between start() and stop(); a suite expects `seen` to stay empty. */
export class UnhandledRejections {
  readonly seen: unknown[] = [];
  private readonly onUnhandled = (reason: unknown): void => {
    this.seen.push(reason);
  };

  start(): void {
    realProcess.on('unhandledRejection', this.onUnhandled);
  }

  stop(): void {
    realProcess.off('unhandledRejection', this.onUnhandled);
  }
}

/** Creates and initialises a LockService, and adds it to `services` so the suite's afterEach closes it. */
export async function startService(services: LockService[], options: DistributedLockModuleOptions): Promise<LockService> {
  const service = new LockService(options);
  services.push(service);
  await service.onModuleInit();
  return service;
}

/**
 * Closes every service through `calls` (so a hanging close shows up as pending) and expects each
 * close to succeed, and to take less than `withinMs` when that is given.
 */
export async function expectCleanClose(calls: SettleTracker, services: LockService[], withinMs?: number, lateness?: TimerLateness): Promise<void> {
  for (const service of services) {
    const closed = await timed(calls.track('close()', service.close()));
    expect(closed.error).toBeUndefined();
    // Plus the time this process was stalled meanwhile, when measured (see TimerLateness.boundFor).
    if (withinMs !== undefined) expect(closed.ms).toBeLessThan(lateness ? lateness.boundFor(closed, withinMs, 0) : withinMs);
  }
}

/**
 * Once a fault is gone: calls `acquire` every 10 ms until it returns a lock or `giveUpMs` passed
 * since `since` (hrMs()). Every failed attempt must be LockConnectionError (never busy, never a
 * hang); each is tracked as `${label} #n`. Returns the lock (undefined if none came), how many
 * attempts it took, and how long after `since` the loop ended.
 */
export async function acquireUntilBack(
  calls: SettleTracker,
  label: string,
  acquire: () => Promise<Lock>,
  { since, giveUpMs }: { since: number; giveUpMs: number },
): Promise<{ lock: Lock | undefined; attempts: number; ms: number }> {
  let lock: Lock | undefined;
  let attempts = 0;
  while (!lock && hrMs() - since < giveUpMs) {
    attempts++;
    const attempt = await timed(calls.track(`${label} #${attempts}`, acquire()));
    if (attempt.value) lock = attempt.value;
    else {
      expect(attempt.error).toBeInstanceOf(LockConnectionError);
      await sleep(10);
    }
  }
  return { lock, attempts, ms: hrMs() - since };
}

/** End of every fault case: no library call left hanging, no unhandled rejection. */
export function expectNothingLeft(calls: SettleTracker, unhandled: UnhandledRejections): void {
  expect(calls.pending()).toEqual([]);
  expect(unhandled.seen).toEqual([]);
}

/**
 * End of a fault suite: let any late failure surface before the last look (50 ms), stop listening,
 * stop Redis, and expect no unhandled rejection came in the meantime.
 */
export async function finishFaultSuite(unhandled: UnhandledRejections, redis: RedisProcess): Promise<void> {
  await sleep(50);
  unhandled.stop();
  await redis.stop();
  expect(unhandled.seen).toEqual([]);
}

/** What a fault suite's tests share: its Redis, a plain client, this test's tracked calls and services. */
export interface FaultSuite {
  redis: RedisProcess;
  client: Redis;
  calls: SettleTracker;
  services: LockService[];
  /** This process's timer lateness, measured through each test (started before it, stopped after it). */
  lateness: TimerLateness;
}

/**
 * The lifecycle every fault suite shares, registered once here: its own Redis and a plain client,
 * unhandled rejections watched for the whole suite, and after each test: the fault healed (`heal`),
 * every service closed cleanly (within `closeWithinMs`), nothing pending, no unhandled rejection;
 * at the end Redis stopped and no process left behind.
 */
export function faultSuite(
  hooks: {
    heal?: (suite: FaultSuite) => void | Promise<void>;
    closeWithinMs?: number;
    afterClose?: () => void | Promise<void>;
    beforeFinish?: () => void | Promise<void>;
  } = {},
): FaultSuite {
  const unhandled = new UnhandledRejections();
  const suite = { calls: new SettleTracker(), services: [], lateness: undefined } as unknown as FaultSuite;
  beforeAll(async () => {
    unhandled.start();
    suite.redis = await RedisProcess.start();
    suite.client = suite.redis.client();
  });
  beforeEach(() => {
    suite.calls = new SettleTracker();
    suite.services = [];
    suite.lateness = new TimerLateness().start();
  });
  afterEach(async () => {
    try {
      await hooks.heal?.(suite);
      await expectCleanClose(suite.calls, suite.services, hooks.closeWithinMs, suite.lateness);
      await hooks.afterClose?.();
      expectNothingLeft(suite.calls, unhandled);
    } finally {
      suite.lateness.stop();
    }
  });
  afterAll(async () => {
    await hooks.beforeFinish?.();
    await finishFaultSuite(unhandled, suite.redis);
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));
  return suite;
}
