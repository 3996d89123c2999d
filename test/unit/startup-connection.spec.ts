/**
 * Redis unreachable at startup. By default (requireRedisAtStartup) the application does not start:
 * init() rejects within startupTimeout with a LockConnectionError naming the address, and the
 * connection the module made is closed (nothing keeps retrying in the background). With the option
 * off, startup does not wait; lock calls fail with LockConnectionError until a server appears on
 * that address, then work. Nothing listens on the ports used here until the test starts a server.
 */
import 'reflect-metadata';
import { createServer, type AddressInfo } from 'node:net';
import { Injectable, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { DistributedLockModule, Locked, LockConnectionError, LockOptionsError, LockService, currentLock } from '../../lib';
import type { DistributedLockModuleOptions } from '../../lib';
import { freePort } from '../harness/free-port';
import { RedisProcess } from '../harness/redis-process';
import { sleep } from './core-helpers';

@Injectable()
class Settlements {
  @Locked('settle:<0>')
  async settle(_id: string) {
    return currentLock()?.key ?? 'unlocked';
  }
}

function compile(options: Omit<DistributedLockModuleOptions, 'redis'>, redis: string): Promise<TestingModule> {
  @Module({ imports: [DistributedLockModule.forRoot({ redis, keyPrefix: 'boot:', ...options })], providers: [Settlements] })
  class AppModule {}
  return Test.createTestingModule({ imports: [AppModule] }).compile();
}

describe('Redis unreachable at startup', () => {
  const opened: TestingModule[] = [];
  const servers: RedisProcess[] = [];
  afterEach(async () => {
    // After a failed init(), Nest's close() rethrows that failure and runs no hook: the module cleaned up itself.
    await Promise.all(opened.splice(0).map((app) => app.close().catch(() => undefined)));
    await Promise.all(servers.splice(0).map((server) => server.stop()));
  });

  it('by default, init() rejects within startupTimeout with a LockConnectionError naming the address, and closes the connection', async () => {
    const port = await freePort();
    const app = await compile({ startupTimeout: 600 }, `redis://127.0.0.1:${port}`);
    opened.push(app);
    const started = performance.now();
    const error = await app.init().catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(LockConnectionError);
    const { message, operation } = error as LockConnectionError;
    expect(operation).toBe('connect');
    expect(message).toContain(`Redis at 127.0.0.1:${port} is not reachable (connect ECONNREFUSED 127.0.0.1:${port})`);
    expect(message).toContain('no connection within 600 ms (startupTimeout)');
    expect(message).toContain('requireRedisAtStartup: false');
    expect(elapsed).toBeGreaterThanOrEqual(590);
    expect(elapsed).toBeLessThan(600 + 1_000);
    // Not left retrying in the background (Nest's close() does nothing after a failed init): a server
    // started on that address now never hears from the module's connection (it retried every 500 ms at most).
    const server = await RedisProcess.start({ port });
    servers.push(server);
    const probe = server.client();
    await sleep(1_200);
    const ownId = String(await probe.client('ID'));
    const clients = String(await probe.client('LIST'))
      .trim()
      .split('\n');
    expect(clients.filter((line) => !line.startsWith(`id=${ownId} `))).toEqual([]);
    await expect(app.get(LockService).acquire('after')).rejects.toThrow(/closing or closed/);
  });

  it('a server there that does not speak Redis (an HTTP proxy): the error says so, not the words of a refused command', async () => {
    const http = createServer((socket) => {
      socket.on('error', () => undefined); // the client may reset it
      socket.resume(); // read (and drop) the client's bytes, so its close is seen and http.close() can end
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const { port } = http.address() as AddressInfo;
    let answered = 0;
    http.on('connection', () => answered++);
    try {
      const app = await compile({ startupTimeout: 600 }, `redis://127.0.0.1:${port}`);
      opened.push(app);
      const error = await app.init().catch((e: unknown) => e);
      expect(answered).toBeGreaterThan(0); // the fault: the module reached that server, and it answered HTTP
      expect(error).toBeInstanceOf(LockConnectionError);
      const { message } = error as LockConnectionError;
      expect(message).toContain(`Redis at 127.0.0.1:${port} is not reachable (Protocol error`);
      expect(message).toContain('does not speak the Redis protocol');
      expect(message).not.toContain("Stream isn't writeable");
    } finally {
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
  });

  it('startup waits for a Redis that comes up within startupTimeout, then locks work', async () => {
    const port = await freePort();
    const app = await compile({ startupTimeout: 5_000 }, `redis://127.0.0.1:${port}`);
    opened.push(app);
    const booting = app.init();
    await sleep(300); // the first connection attempts are refused meanwhile
    servers.push(await RedisProcess.start({ port }));
    await booting;
    await expect(app.get(Settlements).settle('1')).resolves.toBe('settle:1');
  });

  it('with requireRedisAtStartup: false, it boots at once; locks fail with LockConnectionError, then work once a server listens there', async () => {
    const port = await freePort();
    const app = await compile({ requireRedisAtStartup: false, commandTimeout: 1_500 }, `redis://127.0.0.1:${port}`);
    opened.push(app);
    const started = performance.now();
    await app.init();
    // No stall waiting for a server that is not there (startupTimeout, 10 s); 2 s allows a loaded machine (was 500 ms).
    expect(performance.now() - started).toBeLessThan(2_000);

    const locks = app.get(LockService);
    const error = await locks.acquire('nowhere').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as Error).message).toContain(`Redis at 127.0.0.1:${port} is not reachable`);
    await expect(app.get(Settlements).settle('2')).rejects.toThrow(LockConnectionError);

    servers.push(await RedisProcess.start({ port }));
    // The client reconnects on its own (every 500 ms at most); each call waits for it within commandTimeout.
    await expect(app.get(Settlements).settle('3')).resolves.toBe('settle:3');
    const lock = await locks.acquire('somewhere');
    expect(lock.isHeld()).toBe(true);
    expect(await lock.release()).toBe(true);
  });

  it('refuses bad values of the startup options by name', async () => {
    await expect(compile({ startupTimeout: 0 }, 'redis://127.0.0.1:1')).rejects.toThrow(LockOptionsError);
    await expect(compile({ startupTimeout: 0 }, 'redis://127.0.0.1:1')).rejects.toThrow(/Invalid option "startupTimeout"/);
    await expect(compile({ requireRedisAtStartup: 'yes' as unknown as boolean }, 'redis://127.0.0.1:1')).rejects.toThrow(
      /Invalid option "requireRedisAtStartup": expected true or false/,
    );
  });
});
