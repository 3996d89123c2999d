/**
 * A Redis user whose ACL refuses what every lock call does. A common least-privilege ACL grants the lock
 * keys and channels, reads and writes, but not scripts (`-@scripting`): such a service started, reported
 * healthy, and failed every acquire with "Check that Redis is reachable" as a connection error that
 * clients retried for ever. Now startup refuses it (requireRedisAtStartup), the health probe (a script,
 * as lock calls are) is down naming the grant, and each call's error names the grant.
 */
import 'reflect-metadata';
import { Controller, Get, Module, Param } from '@nestjs/common';
import request from 'supertest';
import { TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import type { INestApplication } from '@nestjs/common';
import { DistributedLockModule, LockConnectionError, Locked, LockService } from '../../lib';
import type { DistributedLockModuleOptions } from '../../lib';
import { LockHealthIndicator } from '../../lib/terminus';
import { RedisProcess } from '../harness/redis-process';

const KEY_PREFIX = 'acl:';
/** The grant every one of these messages must name. */
const SCRIPTING_GRANT =
  /NOPERM this user has no permissions to run the 'eval' command.*lacks a permission that lock calls need.*\+@scripting \(or at least \+eval \+evalsha\)/;

describe('LockHealthIndicator and lock calls for a Redis user without +@scripting', () => {
  let redis: RedisProcess;
  let app: INestApplication | undefined;
  let url: string;

  beforeAll(async () => {
    redis = await RedisProcess.start();
    const admin = redis.client();
    await admin.call(
      'ACL',
      'SETUSER',
      'locker',
      'on',
      '>pw',
      `~${KEY_PREFIX}*`,
      `&${KEY_PREFIX}*`,
      '+@read',
      '+@write',
      '+@connection',
      '+@pubsub',
      '+info',
      '+time',
      '-@scripting',
    );
    url = `redis://locker:pw@${redis.host}:${redis.port}`;
    // The fault is real: this user may write the lock keys but may not run a script.
    const user = redis.client({ username: 'locker', password: 'pw' });
    expect(await user.set(`${KEY_PREFIX}{x}`, '1', 'PX', 100)).toBe('OK');
    await expect(user.eval('return 1', 0)).rejects.toThrow(/^NOPERM this user has no permissions to run the 'eval' command/);
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(async () => {
    await redis.stop();
  });

  async function start(options: Partial<DistributedLockModuleOptions>): Promise<INestApplication> {
    @Module({ imports: [TerminusModule.forRoot({ logger: false })], providers: [LockHealthIndicator] })
    class HealthModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ redis: url, keyPrefix: KEY_PREFIX, commandTimeout: 500, ...options }), HealthModule],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return app;
  }

  it('fails the startup with a LockConnectionError naming the grant, instead of starting a service that can grant no lock', async () => {
    const error = await start({}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as Error).message).toMatch(/refuses the module's Redis user what every lock call needs, so the application did not start/);
    expect((error as Error).message).toMatch(SCRIPTING_GRANT);
  });

  it('without requireRedisAtStartup: health is down naming the grant, and an acquire fails naming it, not "check that Redis is reachable"', async () => {
    const started = await start({ requireRedisAtStartup: false });
    const health = await started.get(LockHealthIndicator).isHealthy('lock');
    expect(health.lock.status).toBe('down');
    expect(health.lock.message).toMatch(SCRIPTING_GRANT);

    const error = await started
      .get(LockService)
      .acquire('order:1', { onBusy: 'throw' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as LockConnectionError).operation).toBe('acquire');
    expect((error as Error).message).toMatch(SCRIPTING_GRANT);
    expect((error as Error).message).not.toMatch(/reachable/);
  });

  it('over HTTP an @Locked route answers a logged 500, not 503 with Retry-After: no retry succeeds until the grant is given', async () => {
    @Controller('acl')
    class AclController {
      @Get(':id')
      @Locked('order:<0>')
      async order(@Param('id') id: string) {
        return { id };
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ redis: url, keyPrefix: KEY_PREFIX, commandTimeout: 500, requireRedisAtStartup: false })],
      controllers: [AclController],
    }).compile();
    const logged: string[] = [];
    app = moduleRef.createNestApplication({
      logger: { log() {}, warn() {}, debug() {}, verbose() {}, error: (...parts: unknown[]) => void logged.push(parts.map(String).join(' ')) },
    });
    await app.init();
    const res = await request(app.getHttpServer()).get('/acl/7').expect(500);
    expect(res.headers['retry-after']).toBeUndefined();
    expect(res.body).toEqual({ statusCode: 500, message: 'Internal server error' });
    // The operator learns what to grant from the log; the client is told nothing of the store.
    expect(logged.join('\n')).toMatch(SCRIPTING_GRANT);
  });

  it('Redlock: startup fails naming the node and the grant; without requireRedisAtStartup health is down naming the grant', async () => {
    // Two more independent masters with the same user: a majority of nodes refuses scripts.
    const others = [await RedisProcess.start(), await RedisProcess.start()];
    try {
      for (const node of others)
        await node.client().call('ACL', 'SETUSER', 'locker', 'on', '>pw', `~${KEY_PREFIX}*`, `&${KEY_PREFIX}*`, '+@all', '-@scripting');
      const nodes = [url, ...others.map((node) => `redis://locker:pw@${node.host}:${node.port}`)];
      const error = await start({ redis: undefined, nodes }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(LockConnectionError);
      expect((error as Error).message).toMatch(/^Redlock: Redis at 127\.0\.0\.1:\d+ refuses the module's Redis user what every lock call needs/);
      expect((error as Error).message).toMatch(SCRIPTING_GRANT);

      const started = await start({ redis: undefined, nodes, requireRedisAtStartup: false });
      const health = await started.get(LockHealthIndicator).isHealthy('lock');
      expect(health.lock.status).toBe('down');
      expect(health.lock.message).toMatch(SCRIPTING_GRANT);
    } finally {
      await app?.close();
      app = undefined;
      await Promise.all(others.map((node) => node.stop()));
    }
  });

  it('a user that may run scripts but not TIME (in no @read or @write category) is refused at startup too, naming the commands', async () => {
    const admin = redis.client();
    await admin.call(
      'ACL',
      'SETUSER',
      'notime',
      'on',
      '>pw',
      `~${KEY_PREFIX}*`,
      `&${KEY_PREFIX}*`,
      '+@read',
      '+@write',
      '+@connection',
      '+@scripting',
    );
    // The fault: a plain script runs, one calling TIME is refused inside it.
    const user = redis.client({ username: 'notime', password: 'pw' });
    expect(await user.eval('return 1', 0)).toBe(1);
    await expect(user.eval("return redis.call('TIME')", 0)).rejects.toThrow(/can't run this command/);
    const error = await start({ redis: `redis://notime:pw@${redis.host}:${redis.port}` }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as Error).message).toMatch(
      /The user executing the script can't run this command or subcommand\).*\+@read \+@write \+time \+publish/,
    );
  });
});
