/**
 * Startup's permission check on a Redis Cluster whose masters do not all grant the module's user the same.
 * ACLs are each node's own (ACL SETUSER and users.acl are not shared over the cluster bus), so one master
 * that lacks +@scripting fails every lock call on its share of the slots. Startup asked only the master of
 * the `{health}` probe key's slot, and started a service that refused a third of its keys for good; it now
 * asks every master of the slot table and names the one that refuses.
 */
import 'reflect-metadata';
import { LockConnectionError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { healthProbeKey } from '../../lib/redis/health-probe';
import { RedisCluster } from '../harness/redis-cluster';
import type { RedisProcess } from '../harness/redis-process';
import { redisKeySlot } from '../harness/redis-key-slot';

const KEY_PREFIX = 'acl:';

describe('startup on a Redis Cluster whose masters grant the lock user differently', () => {
  let cluster: RedisCluster;
  let service: LockService | undefined;
  /** The master whose ACL is changed: not the one that owns the `{health}` probe key's slot (the one startup used to ask). */
  let refusing: RedisProcess;

  beforeAll(async () => {
    cluster = await RedisCluster.start(3);
    const probeOwner = await cluster.ownerOf(redisKeySlot(healthProbeKey(KEY_PREFIX)));
    refusing = cluster.nodes.find((node) => node !== probeOwner)!;
  }, 30_000);
  afterEach(async () => {
    await service?.close();
    service = undefined;
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  /** The lock user on every master; on `refusing` without scripts when `scriptsRefused`. */
  async function grant(scriptsRefused: boolean): Promise<void> {
    for (const node of cluster.nodes) {
      const scripting = node === refusing && scriptsRefused ? '-@scripting' : '+@scripting';
      await cluster.admin(node).call('ACL', 'SETUSER', 'locker', 'reset', 'on', '>pw', `~${KEY_PREFIX}*`, `&${KEY_PREFIX}*`, '+@all', scripting);
    }
  }

  function start(): Promise<void> {
    service = new LockService({
      redis: cluster.client({ redisOptions: { username: 'locker', password: 'pw' } }),
      keyPrefix: KEY_PREFIX,
      commandTimeout: 1_000,
    });
    return service.onModuleInit();
  }

  /** The first lock name `k<i>` whose keys live on `node`. */
  async function keyOn(node: RedisProcess): Promise<string> {
    for (let i = 0; ; i++) {
      if ((await cluster.ownerOf(redisKeySlot(lockRedisKeys(KEY_PREFIX, `k${i}`).lock))) === node) return `k${i}`;
    }
  }

  it('refuses to start, naming the master that may not run scripts, where it started and failed every lock on that master', async () => {
    await grant(true);
    // The fault is real: that master refuses the user a script on a lock key, the others run it.
    for (const node of cluster.nodes) {
      const user = node.client({ username: 'locker', password: 'pw' });
      const run = user.eval('return 1', 1, lockRedisKeys(KEY_PREFIX, await keyOn(node)).lock);
      if (node === refusing) await expect(run).rejects.toThrow(/^NOPERM this user has no permissions to run the 'eval' command/);
      else await expect(run).resolves.toBe(1);
      user.disconnect();
    }
    const error = await start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as Error).message).toMatch(/refuses the module's Redis user what every lock call needs, so the application did not start/);
    expect((error as Error).message).toContain(`Cluster master 127.0.0.1:${refusing.port}: Redis refused permission check`);
    expect((error as Error).message).toMatch(/\+@scripting \(or at least \+eval \+evalsha\)/);
  });

  it('control: with every master granting scripts it starts, and locks on the masters startup did not use to ask are granted', async () => {
    await grant(false);
    await start();
    const lock = await service!.acquire(await keyOn(refusing));
    expect(lock.fencingToken).toBeDefined();
    expect(await lock.release()).toBe(true);
  });
});
