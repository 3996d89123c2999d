/**
 * A Cluster client, an acquire whose reply was lost with the connection to its master after that master granted it:
 * the caller was told `LockConnectionError`, and the clean-up sent at once could not reach that master while its link
 * was down. On a single Redis that clean-up is sent again at the connection's next `ready`; a Cluster client repeats
 * none when one master's connection comes back, and ioredis does not even reconnect that master until a command is
 * routed to it: the key stayed held for its whole ttl by a token nobody uses. The kept clean-up is now tried again per
 * master (lib/redis/cluster-master-probes.ts).
 *
 * Each master is reached through a TcpProxy (ioredis' `natMap` maps the addresses the Cluster announces to them). The
 * client fails a command whose master connection closed at once (`retryDelayOnFailover: 0`): with ioredis' default
 * it is sent again 100 ms later, up to `maxRedirections` times, which replays the acquire and lands the clean-up
 * itself when the outage is short enough; past those retries the clean-up is left to the library, as here.
 */
import type { Cluster } from 'ioredis';
import { LockBusyError, LockConnectionError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { RedisCluster } from '../harness/redis-cluster';
import { redisKeySlot } from '../harness/redis-key-slot';
import type { RedisProcess } from '../harness/redis-process';
import { TcpProxy } from '../harness/tcp-proxy';
import { pollUntil } from '../unit/core-helpers';

const TTL = 20_000;
const COMMAND_TIMEOUT = 2_000;
/** The master's link delay each way: the acquire runs there while its reply waits in the proxy. */
const LINK_DELAY = 300;

describe('Cluster: an acquire whose reply is lost with the connection to its master', () => {
  let cluster: RedisCluster;
  let proxies: TcpProxy[];
  beforeAll(async () => {
    cluster = await RedisCluster.start(3);
    proxies = await Promise.all(cluster.nodes.map((node) => TcpProxy.start(node.port)));
  }, 30_000);
  afterAll(async () => {
    await Promise.all((proxies ?? []).map((proxy) => proxy.stop()));
    await cluster?.stop();
  });

  /** A Cluster client that reaches every master through its proxy. */
  function proxiedClient(): Cluster {
    const natMap = Object.fromEntries(cluster.nodes.map((node, i) => [`${node.host}:${node.port}`, { host: '127.0.0.1', port: proxies[i].port }]));
    return cluster.client({ natMap, retryDelayOnFailover: 0 });
  }

  const masterOf = (key: string): Promise<RedisProcess> => cluster.ownerOf(redisKeySlot(lockRedisKeys('lock:', key).lock));

  /** A key whose lock lives on `master`. */
  async function keyOn(master: RedisProcess, stem: string): Promise<string> {
    for (let i = 0; ; i++) if ((await masterOf(`${stem}:${i}`)) === master) return `${stem}:${i}`;
  }

  it('granted on the master, then the connection is reset and the link cut: the key is given back once the link is back', async () => {
    const key = 'order:1';
    const master = await masterOf(key);
    const proxy = proxies[cluster.nodes.indexOf(master)];
    const admin = cluster.admin(master);
    const client = proxiedClient();
    const locks = new LockService({ redis: client, ttl: TTL, commandTimeout: COMMAND_TIMEOUT });
    const other = new LockService({ redis: cluster.client(), commandTimeout: COMMAND_TIMEOUT });
    try {
      await locks.onModuleInit();
      await other.onModuleInit();
      // Control: a lock on the same master, held through the reset and the clean-ups sent after it, stays held.
      const held = await locks.acquire(await keyOn(master, 'order:held'));
      const kept = (locks.engine.store as unknown as { giveBacksAfterReconnect: { size: number } }).giveBacksAfterReconnect;
      proxy.setDelay(LINK_DELAY);
      const failed = locks.acquire(key).catch((error: unknown) => error);
      // The acquire reaches the master after LINK_DELAY and is granted there; its reply is still in the proxy.
      expect(await pollUntil(async () => (await admin.exists(`lock:{${key}}`)) === 1, 3 * LINK_DELAY)).toBe(true);
      proxy.blackhole(true);
      proxy.resetAll();
      proxy.setDelay(0);
      // The fault happened: the caller was told the acquire failed while the master holds the key for its token.
      expect(await failed).toBeInstanceOf(LockConnectionError);
      const stray = await admin.get(`lock:{${key}}`);
      expect(stray).toMatch(new RegExp(`\\.${TTL}\\.`));
      expect(await admin.pttl(`lock:{${key}}`)).toBeGreaterThan(TTL - 5_000);
      // Its clean-up could not reach the master (the link is cut): kept.
      expect(await pollUntil(() => kept.size === 1, COMMAND_TIMEOUT + 1_000)).toBe(true);
      expect(await admin.get(`lock:{${key}}`)).toBe(stray);
      proxy.blackhole(false);
      // Before: held for the rest of its 20 s ttl; now given back once the link is back.
      expect(await pollUntil(async () => (await admin.exists(`lock:{${key}}`)) === 0, 3_000)).toBe(true);
      expect(kept.size).toBe(0);
      const next = await other.acquire(key, { onBusy: 'throw' });
      expect(await next.release()).toBe(true);
      expect(held.isHeld()).toBe(true);
      expect(await admin.get(`lock:{${held.key}}`)).toBe(held.token);
      expect(await other.acquire(held.key, { onBusy: 'throw' }).catch((e: unknown) => e)).toBeInstanceOf(LockBusyError);
      expect(await held.release()).toBe(true);
    } finally {
      proxy.blackhole(false);
      proxy.setDelay(0);
      await locks.close();
      await other.close();
    }
  }, 30_000);
});
