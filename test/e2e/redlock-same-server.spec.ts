/**
 * Redlock `nodes` that reach one server through different addresses (a DNS alias, a proxy or load balancer in front):
 * the options compare addresses only, so that server's votes counted twice and it alone was a majority of three.
 * With the third node down, locks were still granted (by one server). Startup now asks each node its run_id.
 */
import { Logger } from '@nestjs/common';
import { LockConnectionError, LockOptionsError, LockService } from '../../lib';
import Redis from 'ioredis';
import { closeClient } from '../harness/redis-clients';
import { RedisProcess } from '../harness/redis-process';
import { TcpProxy } from '../harness/tcp-proxy';
import { pollUntil } from '../unit/core-helpers';

describe('Redlock: one server behind two addresses', () => {
  let x: RedisProcess;
  let y: RedisProcess;
  let alias: TcpProxy;
  beforeEach(async () => {
    [x, y] = await Promise.all([RedisProcess.start(), RedisProcess.start()]);
    alias = await TcpProxy.start(x.port);
  });
  afterEach(async () => {
    await alias.stop();
    await Promise.all([x.stop(), y.stop()]);
  });

  it('startup fails with a LockOptionsError naming both entries and the shared run_id', async () => {
    // Clients already connected: every node is checked at startup (one connecting after the first majority is checked
    // when it connects: the next case).
    const clients = [x.client(), new Redis(alias.url), y.client()];
    await Promise.all(clients.map((client) => client.ping()));
    const locks = new LockService({ nodes: clients, commandTimeout: 300, ttl: 2_000 });
    try {
      const error = await locks.onModuleInit().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockOptionsError);
      expect((error as LockOptionsError).option).toBe('nodes[1]');
      expect((error as Error).message).toMatch(
        new RegExp(
          `Redis at 127\\.0\\.0\\.1:${alias.port} is the same Redis server as nodes\\[0\\] \\(Redis at 127\\.0\\.0\\.1:${x.port}\\): both report run_id [0-9a-f]{40}`,
        ),
      );
    } finally {
      await locks.close();
      await closeClient(clients[1]);
    }
  });

  it('without requireRedisAtStartup the second entry never votes: with the third node down, nothing is granted', async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const logged = () => errors.mock.calls.map(([message]) => String(message));
    const locks = new LockService({
      nodes: [x.url, alias.url, y.url],
      commandTimeout: 300,
      ttl: 2_000,
      nodeRecoveryDelay: 0,
      requireRedisAtStartup: false,
    });
    try {
      await locks.onModuleInit();
      const lock = await locks.acquire('order:1');
      await lock.release();
      // The node that connected second was refused when it connected (logged: startup had passed).
      const refusalLogged = await pollUntil(() => logged().some((m) => /same Redis server as nodes\[\d\]/.test(m)), 2_000);
      await y.stop();
      const outcome = await locks.acquire('order:1').catch((e: unknown) => e);
      if (!(outcome instanceof Error)) await (outcome as { release(): Promise<boolean> }).release().catch(() => false);
      expect(outcome).toBeInstanceOf(LockConnectionError);
      expect(refusalLogged).toBe(true);
    } finally {
      await locks.close();
      errors.mockRestore();
    }
  });
});
