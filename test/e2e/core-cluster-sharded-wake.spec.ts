/**
 * Cluster wake-ups over sharded pub/sub. On a Redis 7 Cluster a contended release announces the
 * handover with SPUBLISH on a channel in the lock's own slot, which only that slot's master serves;
 * PUBLISH would be copied to every master over the cluster bus. Proof is taken from the servers:
 * `INFO commandstats` of each master (commands run inside scripts count under their own names) and
 * `PUBSUB SHARDCHANNELS` / `SHARDNUMSUB`. A waiter is configured with a long waiterLease, so its
 * safety-net timer (a third of it) cannot be what woke it: a wake-up within a second is the message.
 *
 * The fallbacks: a Cluster whose servers have no SPUBLISH (renamed away, as on a server before 7.0)
 * and a single Redis keep PUBLISH / SUBSCRIBE, with the very scripts of before.
 */
import Redis, { type Cluster } from 'ioredis';
import { EventEmitter } from 'node:events';
import { LockService } from '../../lib';
import { keySlot } from '../../lib/redis/key-slot';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { LOCK_SCRIPTS, SHARDED_PUBLISHING_SCRIPTS } from '../../lib/redis/scripts';
import type { WakeChannel } from '../../lib/redis/wake-channel';
import type { WakeRoute } from '../../lib/redis/wake-route';
import { commandStats } from '../harness/command-stats';
import { RedisCluster } from '../harness/redis-cluster';
import { redisKeySlot } from '../harness/redis-key-slot';
import { killSurvivors, RedisProcess } from '../harness/redis-process';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
// Safety net of a waiter: a refresh every third of this (about 10 s), far beyond any bound below.
const WAITER_LEASE = 30_000;
// A wake-up by message, with room for a loaded machine; far below WAITER_LEASE / 3.
const WOKEN_WITHIN_MS = 1_500;

const channelOf = (service: LockService): WakeChannel => service.engine.wakeChannel as WakeChannel;
const routeOf = (service: LockService): WakeRoute => (channelOf(service) as unknown as { route: WakeRoute }).route;

/** Holder takes `key`, waiter queues behind it, holder releases: resolves how long after the release the waiter held it. */
async function handover(holder: LockService, waiter: LockService, key: string): Promise<number> {
  const lock = await holder.acquire(key, { ttl: 20_000 });
  const waiting = waiter.acquire(key, { ttl: 20_000, waitTimeout: 15_000 });
  await sleep(100); // queued and subscribed
  const releasedAt = performance.now();
  expect(await lock.release()).toBe(true);
  const next = await waiting;
  const woken = performance.now() - releasedAt;
  expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
  expect(await next.release()).toBe(true);
  return woken;
}

/** Calls of `commands` per master since the last CONFIG RESETSTAT. */
async function callsPerMaster(cluster: RedisCluster, commands: string[]): Promise<Array<Record<string, number>>> {
  return Promise.all(
    cluster.nodes.map(async (node) => {
      const stats = await commandStats(cluster.admin(node));
      return Object.fromEntries(commands.map((c) => [c, stats[c] ?? 0]));
    }),
  );
}

/** `count` user keys whose locks share one slot (the first key's). */
function keysInOneSlot(count: number, prefix: string): string[] {
  const keys = [`${prefix}0`];
  const slot = redisKeySlot(`lock:{${keys[0]}}`);
  for (let i = 1; keys.length < count; i++) if (redisKeySlot(`lock:{${prefix}${i}}`) === slot) keys.push(`${prefix}${i}`);
  return keys;
}

/** `count` user keys (`<prefix><n>`) whose locks `master` owns. */
async function keysOwnedBy(cluster: RedisCluster, master: RedisProcess, prefix: string, count: number): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; keys.length < count; i++) {
    const key = `${prefix}${i}`;
    if ((await cluster.ownerOf(redisKeySlot(lockRedisKeys('lock:', key).lock))) === master) keys.push(key);
  }
  return keys;
}

async function startServices(clients: Array<() => Cluster | string>): Promise<LockService[]> {
  const services = clients.map((client) => new LockService({ redis: client(), ttl: 5_000, commandTimeout: 2_000, waiterLease: WAITER_LEASE }));
  for (const service of services) await service.onModuleInit();
  return services;
}

afterAll(() => expect(killSurvivors()).toEqual([]));

describe('Redis 7 Cluster: sharded wake-ups', () => {
  let cluster: RedisCluster;
  let holder: LockService;
  let waiter: LockService;

  beforeAll(async () => {
    cluster = await RedisCluster.start(3);
    [holder, waiter] = await startServices([() => cluster.client(), () => cluster.client()]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all([holder?.close(), waiter?.close()]);
    await cluster?.stop();
  });

  it('a contended handover wakes the waiter by SPUBLISH on the lock master only: no PUBLISH on any master', async () => {
    // Each service asked the masters once, at startup (the answer may still be on its way).
    expect(await Promise.all([routeOf(holder).detect(), routeOf(waiter).detect()])).toEqual(['sharded', 'sharded']);
    const key = 'sharded:1';
    const slot = redisKeySlot(lockRedisKeys('lock:', key).lock);
    const owner = await cluster.ownerOf(slot);
    await handover(holder, waiter, key); // warm: the waiter's service subscribes to the slot's channel
    await Promise.all(cluster.nodes.map((n) => cluster.admin(n).call('CONFIG', 'RESETSTAT')));

    const woken: number[] = [];
    for (let i = 0; i < 5; i++) woken.push(await handover(holder, waiter, key));

    const calls = await callsPerMaster(cluster, ['spublish', 'publish', 'ssubscribe', 'subscribe']);
    const ownerIndex = cluster.nodes.indexOf(owner);
    console.log(`sharded handover: woken after ${woken.map((ms) => Math.round(ms)).join(', ')} ms; calls per master ${JSON.stringify(calls)}`);
    expect(Math.max(...woken)).toBeLessThan(WOKEN_WITHIN_MS);
    // One SPUBLISH per handover, on the lock's master; nothing published anywhere else, no PUBLISH at all.
    calls.forEach((c, i) => {
      expect(c.publish).toBe(0);
      expect(c.spublish).toBe(i === ownerIndex ? 5 : 0);
      // Subscribed once, at the warm-up: nothing per wait.
      expect(c.ssubscribe + c.subscribe).toBe(0);
    });

    // The channel the waiter listens on is in the lock's slot, served by that master.
    const channels = (await cluster.admin(owner).call('PUBSUB', 'SHARDCHANNELS')) as string[];
    expect(channels).toHaveLength(1);
    expect(channels[0]).toMatch(/^lock:waiters:\{[0-9A-Za-z_-]{1,3}\}:/);
    expect(redisKeySlot(channels[0])).toBe(slot);
    expect(keySlot(channels[0])).toBe(slot);
    expect(await cluster.admin(owner).call('PUBSUB', 'SHARDNUMSUB', channels[0])).toEqual([channels[0], 1]);
    for (const node of cluster.nodes.filter((n) => n !== owner)) expect(await cluster.admin(node).call('PUBSUB', 'SHARDCHANNELS')).toEqual([]);
    // No plain channel at all.
    for (const node of cluster.nodes) expect(await cluster.admin(node).call('PUBSUB', 'CHANNELS')).toEqual([]);
    expect(channelOf(waiter).state).toBe('subscribed');
  });

  it('one subscription per slot, not per lock: waits on many keys of one slot add no channel', async () => {
    const keys = keysInOneSlot(4, 'same-slot:');
    const slot = redisKeySlot(lockRedisKeys('lock:', keys[0]).lock);
    const owner = await cluster.ownerOf(slot);
    const before = ((await cluster.admin(owner).call('PUBSUB', 'SHARDCHANNELS')) as string[]).length;
    for (const key of keys) expect(await handover(holder, waiter, key)).toBeLessThan(WOKEN_WITHIN_MS);
    const after = (await cluster.admin(owner).call('PUBSUB', 'SHARDCHANNELS')) as string[];
    expect(after.length - before).toBeLessThanOrEqual(1);
    expect(after.filter((c) => redisKeySlot(c) === slot)).toHaveLength(1);
  });

  it("after the lock's slot moves to another master while a waiter waits, the waiter is still woken within a second", async () => {
    const key = 'sharded:moving';
    const { lock: lockName } = lockRedisKeys('lock:', key);
    const slot = redisKeySlot(lockName);
    const from = await cluster.ownerOf(slot);
    const to = cluster.nodes.find((n) => n !== from)!;
    await handover(holder, waiter, key); // subscribed on `from`

    const lock = await holder.acquire(key, { ttl: 20_000 });
    const waiting = waiter.acquire(key, { ttl: 20_000, waitTimeout: 15_000 });
    await sleep(100);
    const moved = await cluster.migrateSlot(slot, from, to, { batch: 1, pauseMs: 30 });
    expect(moved).toContain(lockName); // the held lock itself moved, with its queue
    // Redis dropped the old subscription (unasked SUNSUBSCRIBE); the channel subscribes on the new owner.
    let resubscribedAfter = -1;
    const movedAt = performance.now();
    for (let i = 0; i < 100 && resubscribedAfter < 0; i++) {
      const [, count] = (await cluster.admin(to).call('PUBSUB', 'SHARDNUMSUB', routeOf(waiter).slotChannelPrefix(slot) + serviceIdOf(waiter))) as [
        string,
        number,
      ];
      if (count === 1) resubscribedAfter = performance.now() - movedAt;
      else await sleep(20);
    }
    const releasedAt = performance.now();
    expect(await lock.release()).toBe(true);
    const next = await waiting;
    const woken = performance.now() - releasedAt;
    console.log(
      `slot moved: resubscribed on the new master ${Math.round(resubscribedAfter)} ms after the move, waiter woken ${Math.round(woken)} ms after the release`,
    );
    expect(resubscribedAfter).toBeGreaterThanOrEqual(0);
    expect(woken).toBeLessThan(WOKEN_WITHIN_MS);
    expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
    expect(await next.release()).toBe(true);
    expect(await cluster.admin(from).call('PUBSUB', 'SHARDNUMSUB', routeOf(waiter).slotChannelPrefix(slot) + serviceIdOf(waiter))).toEqual([
      expect.any(String),
      0,
    ]);
  });

  it('a handover announced while the subscription is gone (subscriber connection killed) is made up for once it is back: the waiter retries at once, not at its safety net', async () => {
    const key = 'sharded:killed';
    const slot = redisKeySlot(lockRedisKeys('lock:', key).lock);
    const owner = await cluster.ownerOf(slot);
    await handover(holder, waiter, key);
    const lock = await holder.acquire(key, { ttl: 20_000 });
    const waiting = waiter.acquire(key, { ttl: 20_000, waitTimeout: 15_000 });
    await sleep(100);
    // Every pub/sub connection of the lock's master goes: the waiter's subscription with it.
    await cluster.admin(owner).call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    const releasedAt = performance.now();
    expect(await lock.release()).toBe(true);
    const next = await waiting;
    const woken = performance.now() - releasedAt;
    console.log(`subscriber killed just before the release: waiter held the lock ${Math.round(woken)} ms after it`);
    expect(woken).toBeLessThan(WOKEN_WITHIN_MS);
    expect(await next.release()).toBe(true);
  });

  it("a master's subscriber connection lost while the service waits in many of its slots: every slot subscribed again, with one handshake wait (no MaxListenersExceededWarning)", async () => {
    const master = cluster.nodes[0];
    const keys = await keysOwnedBy(cluster, master, 'sharded:many:', 15);
    const held = await Promise.all(keys.map((key) => holder.acquire(key, { ttl: 20_000 })));
    const waiting = keys.map((key) => waiter.acquire(key, { ttl: 20_000, waitTimeout: 15_000 }));
    await sleep(300); // queued, each slot subscribed
    await Promise.all(held.map((lock) => lock.release()));
    await Promise.all((await Promise.all(waiting)).map((lock) => lock.release()));
    expect(waiter.engine.health().wakeChannel).toBe('subscribed');

    // 'ready' listeners added per connection while the slots subscribe again.
    const readyListeners = new Map<object, number>();
    const on = jest.spyOn(Redis.prototype, 'on').mockImplementation(function (
      this: Redis,
      event: string | symbol,
      listener: (...args: unknown[]) => void,
    ) {
      if (event === 'ready') readyListeners.set(this, (readyListeners.get(this) ?? 0) + 1);
      return EventEmitter.prototype.on.call(this, event, listener) as Redis;
    });
    try {
      await cluster.admin(master).call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      const deadline = performance.now() + 5_000;
      while (performance.now() < deadline && waiter.engine.health().wakeChannel !== 'subscribed') await sleep(50);
      expect(waiter.engine.health().wakeChannel).toBe('subscribed');
      // Before: one per slot on the new connection (15 here), past Node's limit of 10: MaxListenersExceededWarning
      // ("11 ready listeners added to [Commander]"), thousands at once for a service waiting in many slots.
      expect(Math.max(0, ...readyListeners.values())).toBeLessThanOrEqual(3);
    } finally {
      on.mockRestore();
    }
  });

  it("one master's ACL refusing the service's channels: waiters in its slots poll, waiters on the other masters are still told", async () => {
    for (const node of cluster.nodes) await cluster.admin(node).call('ACL', 'SETUSER', 'shard-user', 'on', '>pw', '~*', '+@all', 'allchannels');
    const [refusing, other] = [cluster.nodes[0], cluster.nodes[1]];
    await cluster.admin(refusing).call('ACL', 'SETUSER', 'shard-user', 'resetchannels');
    const [h, w] = await startServices([
      () => cluster.client({ redisOptions: { username: 'shard-user', password: 'pw' } }),
      () => cluster.client({ redisOptions: { username: 'shard-user', password: 'pw' } }),
    ]);
    try {
      const [[refusedKey], [otherKey]] = [
        await keysOwnedBy(cluster, refusing, 'acl:refused:', 1),
        await keysOwnedBy(cluster, other, 'acl:other:', 1),
      ];
      await handover(h, w, refusedKey); // polled: its master refuses the subscription
      expect(channelOf(w).subscribedTo(lockRedisKeys('lock:', refusedKey).lock)).toBe(false);
      // Before: the refusal on one master stopped every subscription of the service for 30 s (and the lost-slot
      // loop renewed it every 2 s), so this waiter polled too.
      expect(await handover(h, w, otherKey)).toBeLessThan(WOKEN_WITHIN_MS);
      expect(channelOf(w).subscribedTo(lockRedisKeys('lock:', otherKey).lock)).toBe(true);
    } finally {
      await Promise.all([h.close(), w.close()]);
      for (const node of cluster.nodes) await cluster.admin(node).call('ACL', 'DELUSER', 'shard-user');
    }
  });

  // Why the wake channel keeps per-master connections of its own (docs/design.md): ioredis 5.11's own
  // Cluster sharded subscriptions, checked against this cluster.
  it("ioredis' Cluster client: SSUBSCRIBE by default reaches one node only; with shardedSubscribers it does not follow a moved slot", async () => {
    const noAnswer = <T>(promise: Promise<T>, ms: number) =>
      Promise.race([promise.then(() => 'answered' as const), sleep(ms).then(() => 'no answer' as const)]).catch(() => 'error' as const);
    // One channel on each master.
    const channels: string[] = [];
    const owners = new Set<number>();
    for (let i = 0; channels.length < 3; i++) {
      const owner = cluster.nodes.indexOf(await cluster.ownerOf(redisKeySlot(`probe:{${i}}`)));
      if (!owners.has(owner)) {
        owners.add(owner);
        channels.push(`probe:{${i}}`);
      }
    }
    const byDefault = cluster.client();
    const outcomes = [];
    for (const channel of channels) outcomes.push(await noAnswer(byDefault.ssubscribe(channel), 1_000));
    // Its one subscriber connection sits on one node: a channel another master serves is never confirmed.
    expect(outcomes.filter((o) => o === 'answered')).toHaveLength(1);
    byDefault.disconnect();

    const sharded = cluster.client({ shardedSubscribers: true });
    await sharded.ssubscribe(channels[0]);
    const slot = redisKeySlot(channels[0]);
    const from = await cluster.ownerOf(slot);
    const to = cluster.nodes.find((n) => n !== from)!;
    await cluster.migrateSlot(slot, from, to);
    await sleep(1_000);
    // Redis dropped it on the old owner, and nothing subscribed it on the new one.
    expect(await cluster.admin(from).call('PUBSUB', 'SHARDNUMSUB', channels[0])).toEqual([channels[0], 0]);
    expect(await cluster.admin(to).call('PUBSUB', 'SHARDNUMSUB', channels[0])).toEqual([channels[0], 0]);
    sharded.disconnect();
  });
});

/** The service id in a token: `<service>.<ttl>.<random>`. */
function serviceIdOf(service: LockService): string {
  return (service.engine as unknown as { serviceId: string }).serviceId;
}

describe('Redis 7 Cluster with replicas: the lock master killed (kill -9) and its replica promoted', () => {
  let cluster: RedisCluster;
  let holder: LockService;
  let waiter: LockService;

  beforeAll(async () => {
    // Replicas take over about 2 s after their master stops answering (node timeout 1 s).
    cluster = await RedisCluster.start(3, [], { replicas: 1, nodeTimeoutMs: 1_000 });
    const services = ([holder, waiter] = clusterServices());
    for (const service of services) await service.onModuleInit();
  }, 60_000);

  afterAll(async () => {
    await Promise.all([holder?.close(), waiter?.close()]);
    await cluster?.stop();
  });

  /** ttl long enough for the holder's lease to outlast the failover (its renewals fail meanwhile). */
  function clusterServices(): LockService[] {
    return [0, 1].map(() => new LockService({ redis: cluster.client(), ttl: 10_000, commandTimeout: 1_000, waiterLease: WAITER_LEASE }));
  }

  it("the slot's subscription is made again on the promoted replica with no waiter to ask for it: health back to subscribed, the next handover by message", async () => {
    const key = 'sharded:failover';
    const slot = redisKeySlot(lockRedisKeys('lock:', key).lock);
    const master = await cluster.ownerOf(slot);
    const asker = cluster.nodes.find((n) => n !== master)!;
    const replica = (await cluster.replicaOf(master, asker))!;
    expect(replica).toBeDefined();
    await handover(holder, waiter, key); // the waiter's service subscribed the slot's channel on `master`
    expect(waiter.engine.health().wakeChannel).toBe('subscribed');

    const killedAt = performance.now();
    await master.kill9();
    while ((await cluster.ownerOf(slot, asker)) !== replica) await sleep(100);
    console.log(`failover: the replica owns the slot ${Math.round(performance.now() - killedAt)} ms after the kill`);
    // Lock calls work again at once (the Cluster client follows the new slot map).
    const deadline = performance.now() + 8_000;
    while (waiter.engine.health().wakeChannel !== 'subscribed' && performance.now() < deadline) {
      const lock = await waiter.tryAcquire(key).catch(() => null);
      await lock?.release();
      await sleep(200);
    }
    // Before: one resubscription 50 ms after the connection ended, when the dead master still owned the slot, and
    // none after it: 'disconnected' for good (the review measured it 14.7 s after the kill) while every call worked.
    expect(waiter.engine.health().wakeChannel).toBe('subscribed');
    console.log(`health back to subscribed ${Math.round(performance.now() - killedAt)} ms after the kill`);
    expect(await cluster.admin(replica).call('PUBSUB', 'SHARDNUMSUB', routeOf(waiter).slotChannelPrefix(slot) + serviceIdOf(waiter))).toEqual([
      expect.any(String),
      1,
    ]);
    expect(await handover(holder, waiter, key)).toBeLessThan(WOKEN_WITHIN_MS);
  }, 60_000);
});

describe('a Cluster upgraded to sharded pub/sub under running services (replicas with SPUBLISH, failed over to)', () => {
  const NO_SHARDED_PUBSUB = ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', ''];
  let cluster: RedisCluster;
  const services: LockService[] = [];

  beforeAll(async () => {
    // Masters as before Redis 7.0, their replicas already upgraded.
    cluster = await RedisCluster.start(3, [], { replicas: 1, nodeTimeoutMs: 1_000, nodeArgs: (i) => (i < 3 ? NO_SHARDED_PUBSUB : []) });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => s.close()));
    await cluster?.stop();
  });

  async function service(): Promise<LockService> {
    const [created] = await startServices([() => cluster.client()]);
    services.push(created);
    return created;
  }

  it('a service that found the Cluster plain asks again and turns sharded: handovers with services started after the upgrade are by message both ways', async () => {
    const before = await service();
    expect(await routeOf(before).detect()).toBe('plain');
    routeOf(before).redetectAfterMs = 1_000;
    const masters = cluster.nodes.slice(0, 3);
    for (const replica of cluster.nodes.slice(3)) await cluster.admin(replica).call('CLUSTER', 'FAILOVER');
    // Every slot served by an upgraded node (a replica before).
    const slots = [0, 5_000, 10_000, 16_383];
    for (const deadline = performance.now() + 20_000; performance.now() < deadline; await sleep(200)) {
      const owners = await Promise.all(slots.map((slot) => cluster.ownerOf(slot, cluster.nodes[3])));
      if (owners.every((owner) => !masters.includes(owner))) break;
    }
    const after = await service();
    expect(await routeOf(after).detect()).toBe('sharded');

    // Before: 'plain' for the service's whole life, and each handover between the two waited for the
    // waiter's safety net (waiterLease / 3): 700–850 ms with a 3 s waiterLease in the review, 10 s here.
    const turnedAt = performance.now();
    while (routeOf(before).mode !== 'sharded' && performance.now() - turnedAt < 5_000) await sleep(100);
    expect(routeOf(before).mode).toBe('sharded');
    expect(await handover(before, after, 'upgraded:1')).toBeLessThan(WOKEN_WITHIN_MS);
    expect(await handover(after, before, 'upgraded:2')).toBeLessThan(WOKEN_WITHIN_MS);
  }, 60_000);
});

describe('Cluster without sharded pub/sub (SPUBLISH and SSUBSCRIBE renamed away, as before Redis 7.0)', () => {
  let cluster: RedisCluster;
  let holder: LockService;
  let waiter: LockService;

  beforeAll(async () => {
    cluster = await RedisCluster.start(3, ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', '']);
    [holder, waiter] = await startServices([() => cluster.client(), () => cluster.client()]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all([holder?.close(), waiter?.close()]);
    await cluster?.stop();
  });

  it('keeps PUBLISH / SUBSCRIBE on the service channel, and the waiter is woken by it', async () => {
    expect(await Promise.all([routeOf(holder).detect(), routeOf(waiter).detect()])).toEqual(['plain', 'plain']);
    expect([routeOf(holder).mode, routeOf(waiter).mode]).toEqual(['plain', 'plain']); // known: not a failed ask
    await handover(holder, waiter, 'plain:1');
    await Promise.all(cluster.nodes.map((n) => cluster.admin(n).call('CONFIG', 'RESETSTAT')));
    const woken = await handover(holder, waiter, 'plain:1');
    const calls = await callsPerMaster(cluster, ['publish', 'spublish']);
    console.log(`fallback handover: woken after ${Math.round(woken)} ms; calls per master ${JSON.stringify(calls)}`);
    expect(woken).toBeLessThan(WOKEN_WITHIN_MS);
    expect(calls.reduce((n, c) => n + c.publish, 0)).toBe(1);
    expect(calls.every((c) => c.spublish === 0)).toBe(true);
    // The plain channel is known on every master (the bus copies PUBLISH everywhere).
    const channel = channelOf(waiter).name;
    const subscribers = await Promise.all(
      cluster.nodes.map(async (n) => ((await cluster.admin(n).call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1]),
    );
    expect(subscribers.reduce((a, b) => a + b, 0)).toBe(1);
  });
});

describe('single Redis: the commands of before', () => {
  let redis: RedisProcess;
  let holder: LockService;
  let waiter: LockService;

  beforeAll(async () => {
    redis = await RedisProcess.start();
    [holder, waiter] = await startServices([() => redis.url, () => redis.url]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all([holder?.close(), waiter?.close()]);
    await redis?.stop();
  });

  it('is plain from construction (nothing asked), PUBLISHes with the scripts of before and never loads a sharded one', async () => {
    const route = routeOf(new LockService({ redis: redis.client({ lazyConnect: true }) }));
    expect(route.mode).toBe('plain'); // synchronously: no detection round trip on a single Redis
    expect(route.scripts.release).toBe(LOCK_SCRIPTS.release);

    const admin = redis.client();
    await admin.call('CONFIG', 'RESETSTAT');
    const woken = await handover(holder, waiter, 'single:1');
    const stats = await commandStats(admin);
    expect(woken).toBeLessThan(WOKEN_WITHIN_MS);
    expect(stats.publish).toBe(1);
    expect(stats.spublish).toBeUndefined();
    expect(stats.command).toBeUndefined(); // no COMMAND INFO: nothing detected on a single Redis
    const shas = Object.values(SHARDED_PUBLISHING_SCRIPTS).map((s) => s.sha);
    expect(await admin.call('SCRIPT', 'EXISTS', ...shas)).toEqual([0, 0, 0]);
    expect(await admin.call('SCRIPT', 'EXISTS', LOCK_SCRIPTS.release.sha)).toEqual([1]);
  });
});
