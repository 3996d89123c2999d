/**
 * T7 — Cluster resharding. Four LockServices, each with its own ioredis Cluster client, hammer one
 * key while its slot is moved between the three masters by hand (IMPORTING / MIGRATING, MIGRATE
 * key by key, SETSLOT NODE). During a move the lock's four keys are split between two nodes, so
 * clients meet TRYAGAIN (a script whose keys are half moved), ASK (all its keys moved, slot not yet
 * handed over), MOVED (the slot has a new owner) and NOSCRIPT (a node that never ran our scripts).
 * ioredis follows the redirections and the library re-sends a NOSCRIPT call as EVAL; the lock
 * must stay exclusive across all of it and never call a redirection "busy".
 *
 * Proof that the fault fired: the slot owner changed at every move, the held lock's own key was
 * among the keys moved, and the servers' `INFO errorstats` counted the redirections they sent.
 * The control test runs the same move with ioredis' redirection budget cut to one, and must see
 * the redirections reach the library, as LockConnectionError.
 */
import type { Cluster, ClusterOptions } from 'ioredis';
import { Lock, LockConnectionError, LockService } from '../../lib';
import { checkHistory, Section } from '../harness/history';
import { RedisCluster } from '../harness/redis-cluster';
import { killSurvivors, RedisProcess } from '../harness/redis-process';

const KEY = 'reshard:hot';
const CONTENDERS = 4;
const TTL = 1_500;
// Long enough to outlast every redirection ioredis retries (16 × 100 ms TRYAGAIN at most): a
// timeout here would be the library's, not the move's.
const COMMAND_TIMEOUT = 3_000;
// Nobody may time out: a wait ending in LockTimeoutError would mean a redirection stalled the queue.
const WAIT_TIMEOUT = 20_000;
// Work on each owner between moves, so sections run on every node the slot visits.
const BETWEEN_MOVES_MS = 400;
// One key per MIGRATE, with pauses: clients meet the slot half moved (TRYAGAIN) and all moved but not
// yet handed over (ASK). Every state lasts far less than ioredis' redirection budget (see COMMAND_TIMEOUT).
const MOVE = { batch: 1, pauseMs: 60 };
// The control's move: each state lasts longer than a redirection ioredis retries once.
const CONTROL_MOVE = { batch: 1, pauseMs: 250 };
// Every service has waited once (and so subscribed its wake channel) before the first move.
const WARM_UP_MS = 300;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const now = () => process.hrtime.bigint().toString();

interface Contention {
  sections: Section[];
  counter: number;
  errors: unknown[];
  logs: string[];
  services: LockService[];
}

describe('T7 Redis Cluster resharding', () => {
  let cluster: RedisCluster;
  let slot: number;
  let lockKey: string;

  beforeAll(async () => {
    cluster = await RedisCluster.start(3);
    lockKey = `lock:{${KEY}}`;
    slot = Number(await cluster.admin(cluster.nodes[0]).call('CLUSTER', 'KEYSLOT', lockKey));
  }, 30_000);

  afterAll(async () => {
    await cluster?.stop();
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));

  /**
   * Counters of this run only: not the previous test's redirections, nor the ERR each new
   * connection of ioredis' Cluster subscriber gets for CLIENT SETINFO (unknown to Redis 7.0).
   */
  const resetErrorStats = () => Promise.all(cluster.nodes.map((n) => cluster.admin(n).call('CONFIG', 'RESETSTAT')));

  /**
   * Runs CONTENDERS services on one key, from WARM_UP_MS before `during()` until it resolves. Each
   * section is a deliberately non-atomic read-sleep-write of a shared counter: two holders at once
   * lose an increment. Every error is kept (and the contender tries again), so nothing is hidden by
   * a crash of the loop.
   */
  async function contend(clientOptions: ClusterOptions, during: () => Promise<void>, longSections = true): Promise<Contention> {
    const services: LockService[] = [];
    const logs: string[] = [];
    for (let i = 0; i < CONTENDERS; i++) {
      const client: Cluster = cluster.client(clientOptions);
      const service = new LockService({ redis: client, ttl: TTL, commandTimeout: COMMAND_TIMEOUT, waitTimeout: WAIT_TIMEOUT });
      // The watchdog and wake channel only log their trouble (a failed renewal, a CROSSSLOT there): keep every line.
      for (const level of ['log', 'warn', 'error', 'debug'] as const)
        service.engine.logger[level] = (message: unknown) => void logs.push(`${level}: ${String(message)}`);
      await service.onModuleInit();
      services.push(service);
    }
    const sections: Section[] = [];
    const errors: unknown[] = [];
    let counter = 0;
    let entered = 0;
    let stop = false;
    const contender = async (worker: number) => {
      while (!stop) {
        let lock: Lock;
        try {
          lock = await services[worker].acquire(KEY, { onBusy: 'retry' });
        } catch (error) {
          errors.push(error);
          await sleep(10); // a broken run must not spin
          continue;
        }
        const enterAt = now();
        const seen = counter;
        // Every 150th section outlives a renewal interval, so renewals cross the moves too.
        await sleep(++entered % 150 === 50 && longSections ? TTL / 2 : 1);
        counter = seen + 1;
        const exitAt = now();
        let releasedOk = false;
        try {
          releasedOk = await lock.release();
        } catch (error) {
          errors.push(error);
        }
        sections.push({ worker, key: KEY, token: lock.token, fence: lock.fencingToken, enterAt, exitAt, releasedOk });
      }
    };
    const running = Array.from({ length: CONTENDERS }, (_, i) => contender(i));
    try {
      await sleep(WARM_UP_MS);
      await during();
    } finally {
      stop = true;
      await Promise.all(running);
      await Promise.all(services.map((s) => s.close()));
    }
    return { sections, counter, errors, logs, services };
  }

  /** Moves the lock's slot along `route` (each hop while the contenders run), checking the new owner after each. */
  async function reshard(route: RedisProcess[], movedWhileHeld: { count: number }, keysMoved: number[], move = MOVE): Promise<void> {
    for (let hop = 1; hop < route.length; hop++) {
      await sleep(BETWEEN_MOVES_MS);
      const moved = await cluster.migrateSlot(slot, route[hop - 1], route[hop], move);
      keysMoved.push(moved.length);
      // The lock's own key exists only while someone holds it: moved under a holder.
      if (moved.includes(lockKey)) movedWhileHeld.count++;
      for (const asker of cluster.nodes) expect((await cluster.ownerOf(slot, asker)).port).toBe(route[hop].port);
    }
    await sleep(BETWEEN_MOVES_MS);
  }

  it('moving the lock slot between masters 4 times under load: 0 overlaps, 0 CROSSSLOT, no busy or timeout, nothing lost', async () => {
    const home = await cluster.ownerOf(slot);
    const [a, b] = cluster.nodes.filter((n) => n !== home);
    const route = [home, a, home, b, home];
    const movedWhileHeld = { count: 0 };
    const keysMoved: number[] = [];
    let started = 0;

    const run = await contend({}, async () => {
      await resetErrorStats();
      started = performance.now();
      await reshard(route, movedWhileHeld, keysMoved);
    });

    const ms = performance.now() - started;
    const errorStats = await cluster.totalErrorStats();
    const report = checkHistory(run.sections);
    const stats = run.services.map((s) => s.getStats());
    const sum = (field: keyof (typeof stats)[number]) => stats.reduce((total, s) => total + s[field], 0);
    const errorNames = run.errors.map((e) => `${(e as Error).name}: ${(e as Error).message}`);
    const errorCounts: Record<string, number> = {};
    for (const name of errorNames) errorCounts[name] = (errorCounts[name] ?? 0) + 1;
    console.log(
      `T7 resharding: ${report.sections} sections in ${Math.round(ms)} ms, ${route.length - 1} moves, keys moved per move ${JSON.stringify(keysMoved)}, ` +
        `lock key moved under a holder in ${movedWhileHeld.count} moves, errorstats ${JSON.stringify(errorStats)}, ` +
        `errors ${run.errors.length} ${JSON.stringify(errorCounts)}, renewals ${sum('renewals')}, renewal errors ${sum('renewalErrors')}, ` +
        `lost ${sum('lost')}, overlaps ${report.overlaps.length}, counter ${run.counter}`,
    );

    // The fault happened: the slot really moved (checked per hop), under a holder, with every kind of redirection.
    expect(keysMoved.every((n) => n >= 1)).toBe(true); // the fencing counter at least: it outlives every holder
    expect(movedWhileHeld.count).toBeGreaterThanOrEqual(1);
    expect(errorStats.ASK).toBeGreaterThan(0);
    expect(errorStats.TRYAGAIN).toBeGreaterThan(0);
    expect(errorStats.MOVED).toBeGreaterThan(0);
    // …and sections ran throughout (enough that contention was real on every owner).
    expect(report.sections).toBeGreaterThanOrEqual(100);
    expect(new Set(run.sections.map((s) => s.worker)).size).toBe(CONTENDERS);

    // Nothing went wrong: never CROSSSLOT (Redis counts every error reply it sends), never busy or timed out.
    expect(errorStats.CROSSSLOT).toBeUndefined();
    // The only error replies at all: redirections and the script cache of a node that had not run our scripts yet.
    expect(Object.keys(errorStats).filter((name) => !['ASK', 'MOVED', 'TRYAGAIN', 'NOSCRIPT'].includes(name))).toEqual([]);
    expect(run.logs.filter((l) => /CROSSSLOT/.test(l))).toEqual([]);
    expect(errorCounts).toEqual({});
    expect(sum('busy')).toBe(0);
    expect(sum('timeouts')).toBe(0);
    expect(sum('connectionErrors')).toBe(0);
    expect(sum('renewalErrors')).toBe(0);
    expect(sum('lost')).toBe(0);
    expect(sum('renewals')).toBeGreaterThan(0);

    // Exclusive throughout: no overlap, no lost increment, fences strictly increasing, every release found its own lock.
    expect(report.overlaps).toEqual([]);
    expect(run.counter).toBe(report.sections);
    expect(report.fenceViolations).toEqual([]);
    expect(run.sections.filter((s) => s.releasedOk !== true)).toEqual([]);
    // The lock left nothing held behind, wherever the slot ended.
    expect(await cluster.admin(home).exists(lockKey)).toBe(0);
  });

  it('control: with ioredis allowed a single redirection, the same move reaches the library, as LockConnectionError only (never busy)', async () => {
    const home = await cluster.ownerOf(slot);
    const [away] = cluster.nodes.filter((n) => n !== home);

    // Calls must meet the move: no long sections (the queue would wait them out without a call), and
    // each half-moved state outlasts ioredis' 100 ms TRYAGAIN delay, so one redirection cannot be enough.
    const run = await contend({ maxRedirections: 1 }, () => reshard([home, away, home], { count: 0 }, [], CONTROL_MOVE), false);

    const report = checkHistory(run.sections);
    const kinds = [...new Set(run.errors.map((e) => (e as Error).name))];
    console.log(
      `T7 control: ${report.sections} sections, errors ${run.errors.length} ${JSON.stringify(kinds)}, first: ${(run.errors[0] as Error)?.message}`,
    );
    expect(run.errors.length).toBeGreaterThan(0);
    expect(run.errors.every((e) => e instanceof LockConnectionError)).toBe(true);
    expect(run.errors.some((e) => /redirection/i.test((e as Error).message))).toBe(true);
    // Failing calls must not have broken exclusion either.
    expect(report.overlaps).toEqual([]);
    expect(run.counter).toBe(report.sections);
  });
});
