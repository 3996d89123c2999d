/**
 * LockHealthIndicator over a Redis Cluster of three masters, with one master frozen (SIGSTOP) or out of
 * memory, one that does not hold the single-node probe key's slot: the acquires of its third of the
 * slots fail while the other masters answer. The check writes a probe key on every master (in a slot
 * it owns), so it says down every time, naming that master, instead of up or down depending on which
 * node a keyless PING happened to reach, or up while one master refuses writes.
 */
import 'reflect-metadata';
import { HealthIndicatorService } from '@nestjs/terminus';
import { LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { LockHealthIndicator } from '../../lib/terminus';
import { RedisCluster } from '../harness/redis-cluster';
import type { RedisProcess } from '../harness/redis-process';
import { redisKeySlot } from '../harness/redis-key-slot';
import { pollUntil } from '../unit/core-helpers';

const KEY_PREFIX = 'hc:';
const COMMAND_TIMEOUT = 300;
/** The key the check writes (lib/redis/health-probe.ts), spelt out: a test of the old code must compile. */
const PROBE_KEY = `${KEY_PREFIX}{health}:probe`;

describe('LockHealthIndicator over a Redis Cluster', () => {
  let cluster: RedisCluster;
  let locks: LockService;
  let indicator: LockHealthIndicator;

  beforeAll(async () => {
    cluster = await RedisCluster.start(3);
    locks = new LockService({ redis: cluster.client(), keyPrefix: KEY_PREFIX, commandTimeout: COMMAND_TIMEOUT });
    await locks.onModuleInit();
    indicator = new LockHealthIndicator(locks, new HealthIndicatorService());
  }, 30_000);

  afterAll(async () => {
    for (const node of cluster?.nodes ?? []) node.resume();
    await locks?.close();
    await cluster?.stop();
  });

  /**
   * Up within `ms` (polled): the precondition of each case. A check made at once on a loaded machine can be
   * slower than its bound and say down (the flake hunt saw it), which is not what these cases are about.
   */
  const upWithin = (ms: number): Promise<boolean> => pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'up', ms, 50);

  /** The first key `k<i>` whose lock lives on `node`. */
  async function keyOn(node: RedisProcess): Promise<string> {
    for (let i = 0; ; i++) {
      if ((await cluster.ownerOf(redisKeySlot(lockRedisKeys(KEY_PREFIX, `k${i}`).lock))) === node) return `k${i}`;
    }
  }

  it('is down on every check while one master is frozen, naming it, and up once it runs again', async () => {
    expect(await upWithin(3_000)).toBe(true);
    const probeOwner = await cluster.ownerOf(redisKeySlot(PROBE_KEY));
    const frozen = cluster.nodes.find((n) => n !== probeOwner)!;
    const [frozenKey, liveKey] = [await keyOn(frozen), await keyOn(probeOwner)];

    frozen.pause();
    try {
      // Well within cluster-node-timeout (2 s): the others do not mark it failed, the cluster stays ok.
      const [checks, onFrozen, onLive] = await Promise.all([
        Promise.all(Array.from({ length: 6 }, () => indicator.isHealthy('lock'))),
        locks.acquire(frozenKey, { onBusy: 'throw' }).then(
          () => 'acquired',
          (e: Error) => `${e.constructor.name}: ${e.message}`,
        ),
        locks.acquire(liveKey, { onBusy: 'throw' }).then(async (lock) => (await lock.release(), 'acquired')),
      ]);
      // The fault: the frozen master's keys cannot be locked, the others can.
      expect(onFrozen).toMatch(new RegExp(`^LockConnectionError: Redis did not answer acquire within ${COMMAND_TIMEOUT} ms`));
      expect(onLive).toBe('acquired');
      for (const check of checks) {
        expect(check.lock.status).toBe('down');
        expect(check.lock.message).toMatch(
          new RegExp(`Redis did not answer (health probe|ping) of Cluster master 127\\.0\\.0\\.1:${frozen.port} within ${COMMAND_TIMEOUT} ms`),
        );
      }
    } finally {
      frozen.resume();
    }
    expect(await pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'up', 3_000, 50)).toBe(true);
  });
  it("is down while one master (not the single-node probe key's) is out of memory, naming it; every master gets a probe write", async () => {
    expect(await upWithin(3_000)).toBe(true);
    for (const node of cluster.nodes) expect(await cluster.admin(node).keys(`${KEY_PREFIX}{*}:probe`)).toHaveLength(1);
    const probeOwner = await cluster.ownerOf(redisKeySlot(PROBE_KEY));
    const full = cluster.nodes.find((n) => n !== probeOwner)!;
    const [fullKey, liveKey] = [await keyOn(full), await keyOn(probeOwner)];
    await cluster.admin(full).config('SET', 'maxmemory', '1');
    try {
      // The fault: the full master refuses lock writes, the others take them.
      await expect(locks.acquire(fullKey, { onBusy: 'throw' })).rejects.toThrow(/OOM command not allowed/);
      await (await locks.acquire(liveKey, { onBusy: 'throw' })).release();
      const check = await indicator.isHealthy('lock');
      expect(check.lock.status).toBe('down');
      expect(check.lock.message).toMatch(new RegExp(`health probe of Cluster master 127\\.0\\.0\\.1:${full.port} failed: OOM`));
    } finally {
      await cluster.admin(full).config('SET', 'maxmemory', '0');
    }
    expect(await upWithin(3_000)).toBe(true);
  });
});
