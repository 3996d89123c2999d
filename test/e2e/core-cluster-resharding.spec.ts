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
 *
 * While a slot is MIGRATING and all of a lock's keys are still on the source, the source runs a script
 * but fails any command in it on a key the script itself deleted ("non local key"), keeping the writes
 * made before. The last tests release (and abandon) there with only dead waiters queued, which empties
 * the queue and waiters keys half-way through the script.
 */
import type { Cluster, ClusterOptions } from 'ioredis';
import { Lock, LockConnectionError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { LOCK_SCRIPTS, SHARDED_PUBLISHING_SCRIPTS } from '../../lib/redis/scripts';
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

  /** The server clock of `node` in ms (what the scripts compare a waiter's place against). */
  const serverMs = async (node: RedisProcess) => {
    const [sec, usec] = (await cluster.admin(node).call('TIME')) as [string, string];
    return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  };

  /**
   * Queues `tokens` at the tail of a lock's queue as waiters that died: places that lapsed a second ago
   * (written as the acquire script writes them: RPUSH to the queue, ZADD to waiters).
   */
  async function queueDeadWaiters(node: RedisProcess, keys: ReturnType<typeof lockRedisKeys>, tokens: string[]): Promise<void> {
    const admin = cluster.admin(node);
    const lapsed = String((await serverMs(node)) - 1_000);
    for (const token of tokens) {
      await admin.zadd(keys.waiters, lapsed, token);
      await admin.rpush(keys.queue, token);
    }
    await admin.pexpire(keys.queue, 60_000);
    await admin.pexpire(keys.waiters, 60_000);
  }

  /** Starts moving `slot` (IMPORTING on `to`, MIGRATING on `from`) without moving any key, as the first step of a reshard. */
  async function beginMigration(slotToMove: number, from: RedisProcess, to: RedisProcess): Promise<void> {
    await cluster.admin(to).call('CLUSTER', 'SETSLOT', String(slotToMove), 'IMPORTING', await cluster.nodeId(from));
    await cluster.admin(from).call('CLUSTER', 'SETSLOT', String(slotToMove), 'MIGRATING', await cluster.nodeId(to));
  }

  /** What `node` says about `slot`'s migration: the "[slot->-<target id>]" of CLUSTER NODES, or undefined. */
  async function migratingTo(node: RedisProcess, slotOf: number): Promise<string | undefined> {
    const myself = ((await cluster.admin(node).call('CLUSTER', 'NODES')) as string).split('\n').find((l) => l.includes('myself'));
    return myself?.match(new RegExp(`\\[${slotOf}->-(\\w+)\\]`))?.[1];
  }

  it('release while the slot is MIGRATING (keys on the source) with only a dead waiter queued: deletes the lock, no error', async () => {
    const key = 'reshard:dead-waiter';
    const keys = lockRedisKeys('lock:', key);
    const keySlot = Number(await cluster.admin(cluster.nodes[0]).call('CLUSTER', 'KEYSLOT', keys.lock));
    const from = await cluster.ownerOf(keySlot);
    const to = cluster.nodes.find((n) => n !== from)!;
    const holder = new LockService({ redis: cluster.client(), ttl: 20_000, commandTimeout: COMMAND_TIMEOUT });
    const other = new LockService({ redis: cluster.client(), ttl: 5_000, commandTimeout: COMMAND_TIMEOUT });
    try {
      await holder.onModuleInit();
      await other.onModuleInit();
      const lock = await holder.acquire(key);
      const dead = 'deadservice.5000.lapsedPlaceOfACrashedWaiter';
      await queueDeadWaiters(from, keys, [dead]);
      await beginMigration(keySlot, from, to);

      // The fault is set up: the slot is MIGRATING to `to`, all four keys still on the source, and the
      // queue holds only the dead waiter, whose place lapsed.
      const source = cluster.admin(from);
      expect(await migratingTo(from, keySlot)).toBe(await cluster.nodeId(to));
      expect(((await source.call('CLUSTER', 'GETKEYSINSLOT', String(keySlot), '10')) as string[]).sort()).toEqual(
        [keys.lock, keys.fence, keys.queue, keys.waiters].sort(),
      );
      expect(await source.lrange(keys.queue, 0, -1)).toEqual([dead]);
      expect(Number(await source.zscore(keys.waiters, dead))).toBeLessThan(await serverMs(from));
      expect(await source.get(keys.lock)).toBe(lock.token);

      // The release drops the dead waiter (emptying the queue and waiters keys) and deletes the lock.
      await expect(lock.release()).resolves.toBe(true);
      // (Read with GETKEYSINSLOT: the MIGRATING source answers ASK to a command on a key it lacks.)
      expect(await source.call('CLUSTER', 'GETKEYSINSLOT', String(keySlot), '10')).toEqual([keys.fence]);
      expect(holder.getStats().connectionErrors).toBe(0);

      // The move completes (the fencing counter goes along); the key is free on its new owner at once.
      const moved = await cluster.migrateSlot(keySlot, from, to);
      expect(moved).toEqual([keys.fence]);
      expect((await cluster.ownerOf(keySlot)).port).toBe(to.port);
      const next = await other.tryAcquire(key);
      expect(next).not.toBeNull();
      expect(BigInt(next!.fencingToken)).toBeGreaterThan(BigInt(lock.fencingToken));
      await expect(next!.release()).resolves.toBe(true);
    } finally {
      await Promise.all([holder.close(), other.close()]);
    }
  });

  it('every handover script on a MIGRATING source whose keys it empties half-way: no "non local key" error, same replies', async () => {
    const keys = lockRedisKeys('lock:', 'reshard:scripts');
    // A channel in the lock's own slot: a script may SPUBLISH only to one its node serves (wake-route.ts).
    const channelPrefix = 'lock:waiters:{reshard:scripts}:';
    const keySlot = Number(await cluster.admin(cluster.nodes[0]).call('CLUSTER', 'KEYSLOT', keys.lock));
    const from = await cluster.ownerOf(keySlot);
    const to = cluster.nodes.find((n) => n !== from)!;
    const source = cluster.admin(from);
    const all = [keys.lock, keys.fence, keys.queue, keys.waiters];
    const holder = 'holdersvc.20000.holder';
    const live = 'livesvc.5000.live';
    // A MIGRATING source answers ASK for a key it does not have, even to a write that would create it:
    // each case writes its state first, then starts the migration, and ends it before the next case.
    const endMigration = async () => {
      await cluster.admin(to).call('CLUSTER', 'SETSLOT', String(keySlot), 'STABLE');
      await source.call('CLUSTER', 'SETSLOT', String(keySlot), 'STABLE');
    };
    const cases: Array<{ name: string; script: 'release' | 'abandon'; dead: number; live?: boolean; reply: number }> = [
      { name: 'release, one dead waiter', script: 'release', dead: 1, reply: 1 },
      { name: 'release, three dead waiters', script: 'release', dead: 3, reply: 1 },
      { name: 'release, a dead waiter then a live one', script: 'release', dead: 1, live: true, reply: 2 },
      { name: 'abandon by the holder, one dead waiter', script: 'abandon', dead: 1, reply: 1 },
      { name: 'abandon by the holder, a dead waiter then a live one', script: 'abandon', dead: 1, live: true, reply: 1 },
      // The holder's own place the only entry: its LREM empties the queue, nothing is left to grant.
      { name: 'abandon by the holder queued alone', script: 'abandon', dead: 0, reply: 1 },
    ];
    const seen: Array<{ name: string; reply: unknown; queued?: number; lock?: string | null }> = [];
    const wanted: typeof seen = [];
    try {
      for (const [variant, scripts] of [
        ['PUBLISH', LOCK_SCRIPTS],
        ['SPUBLISH', SHARDED_PUBLISHING_SCRIPTS],
      ] as const) {
        for (const c of cases) {
          const name = `${variant} ${c.name}`;
          await source.del(...all);
          await source.set(keys.lock, holder, 'PX', 20_000);
          await source.set(keys.fence, '1000', 'PX', 60_000);
          await queueDeadWaiters(
            from,
            keys,
            Array.from({ length: c.dead }, (_, i) => `deadsvc.5000.dead${i}`),
          );
          if (c.live || c.dead === 0) {
            const token = c.live ? live : holder;
            await source.zadd(keys.waiters, String((await serverMs(from)) + 5_000), token);
            await source.rpush(keys.queue, token);
            await source.pexpire(keys.queue, 60_000);
            await source.pexpire(keys.waiters, 60_000);
          }
          await beginMigration(keySlot, from, to);
          try {
            // All four keys on the source, so it runs the script (with one missing it would redirect).
            expect(await migratingTo(from, keySlot)).toBe(await cluster.nodeId(to));
            expect(await source.exists(...all)).toBe(4);
            const script = scripts[c.script];
            const reply = await source.call('EVAL', script.lua, script.numberOfKeys, ...all, holder, channelPrefix).catch((e: Error) => e.message);
            seen.push({ name, reply });
          } finally {
            await endMigration();
          }
          seen[seen.length - 1].queued = await source.exists(keys.queue, keys.waiters);
          seen[seen.length - 1].lock = await source.get(keys.lock);
          // Same reply as anywhere else; the queue's keys are gone; the lock went to the live waiter
          // queued behind the dead ones, else was deleted.
          wanted.push({ name, reply: c.reply, queued: 0, lock: c.live ? live : null });
        }
      }
    } finally {
      await source.del(...all);
    }
    expect(seen).toEqual(wanted);
  });
});
