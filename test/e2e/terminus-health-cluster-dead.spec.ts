/**
 * LockHealthIndicator over a Redis Cluster whose masters are killed (SIGKILL), one or all. ioredis drops a
 * node whose connection ended from its pool, so a probe of `cluster.nodes('master')` found an empty list
 * (every master dead: "up" in 0 ms) or only the live ones (one dead: "up" or "down" by whether the pool held
 * it at that moment) while the acquires of the dead master's slots failed. The probe now goes by the slot
 * table and the client's state: down on every check, naming the dead master.
 */
import 'reflect-metadata';
import { HealthIndicatorService } from '@nestjs/terminus';
import { LockConnectionError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { LockHealthIndicator } from '../../lib/terminus';
import { RedisCluster } from '../harness/redis-cluster';
import { pingOnce } from '../harness/redis-ping';
import type { RedisProcess } from '../harness/redis-process';
import { redisKeySlot } from '../harness/redis-key-slot';
import { isAlive } from './workers/support/timing';
import { pollUntil, sleep } from '../unit/core-helpers';

const KEY_PREFIX = 'hd:';
const COMMAND_TIMEOUT = 300;
/** How long the checks go on after the kill: past cluster-node-timeout (2 s), when the others mark the master failed. */
const WATCH_MS = 3_000;

describe('LockHealthIndicator over a Redis Cluster with dead masters', () => {
  let cluster: RedisCluster;
  let locks: LockService;
  let indicator: LockHealthIndicator;

  beforeEach(async () => {
    cluster = await RedisCluster.start(3);
    locks = new LockService({ redis: cluster.client(), keyPrefix: KEY_PREFIX, commandTimeout: COMMAND_TIMEOUT });
    await locks.onModuleInit();
    indicator = new LockHealthIndicator(locks, new HealthIndicatorService());
    expect(await pollUntil(async () => (await indicator.isHealthy('lock')).lock.status === 'up', 3_000, 50)).toBe(true);
  }, 30_000);

  afterEach(async () => {
    await locks?.close();
    await cluster?.stop();
  });

  /** The first key `k<i>` whose lock lives on `node`. */
  async function keyOn(node: RedisProcess): Promise<string> {
    for (let i = 0; ; i++) {
      if ((await cluster.ownerOf(redisKeySlot(lockRedisKeys(KEY_PREFIX, `k${i}`).lock))) === node) return `k${i}`;
    }
  }

  async function kill(node: RedisProcess): Promise<void> {
    const pid = node.pid;
    await node.kill9();
    // The fault is real: the process is gone and nothing answers on its port.
    expect(isAlive(pid)).toBe(false);
    expect(await pingOnce(node.port, node.host, 200)).toBe(false);
  }

  /** isHealthy every 100 ms for WATCH_MS: each check's status, message and answer time. */
  async function watch(): Promise<Array<{ status: string; message?: string; ms: number }>> {
    const checks = [];
    for (const until = performance.now() + WATCH_MS; performance.now() < until; await sleep(100)) {
      const from = performance.now();
      const { lock } = await indicator.isHealthy('lock');
      checks.push({ status: lock.status, message: lock.message, ms: performance.now() - from });
    }
    return checks;
  }

  const summary = (checks: Array<{ ms: number }>) => {
    const ms = checks.map((c) => c.ms).sort((a, b) => a - b);
    return `${checks.length} checks, answer median ${ms[ms.length >> 1].toFixed(1)} ms, max ${ms[ms.length - 1].toFixed(1)} ms`;
  };

  it('is down on every check while one master is dead, naming it', async () => {
    const [dead] = cluster.nodes;
    const deadKey = await keyOn(dead);
    await kill(dead);
    // The fault as lock calls see it: the dead master's keys cannot be locked.
    await expect(locks.acquire(deadKey, { onBusy: 'throw' })).rejects.toThrow(LockConnectionError);

    const checks = await watch();
    console.log(`one master of 3 killed: ${summary(checks)}; first message: ${checks[0].message}`);
    for (const check of checks) {
      expect(check.status).toBe('down');
      expect(check.message).toContain(`Cluster master 127.0.0.1:${dead.port}`);
      // The dead master is found without waiting for a reply that cannot come (or within the bound at most).
      expect(check.ms).toBeLessThan(COMMAND_TIMEOUT + 500);
    }
  });

  it('is down on every check while every master is dead', async () => {
    for (const node of cluster.nodes) await kill(node);
    await expect(locks.acquire('k0', { onBusy: 'throw' })).rejects.toThrow(LockConnectionError);

    const checks = await watch();
    console.log(`every master killed: ${summary(checks)}; last message: ${checks[checks.length - 1].message}`);
    for (const check of checks) {
      expect(check.status).toBe('down');
      expect(check.message).toBeDefined();
      expect(check.ms).toBeLessThan(COMMAND_TIMEOUT + 500);
    }
  });
});
