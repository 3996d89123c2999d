/**
 * A connection that reaches a replica after startup: with `requireRedisAtStartup: false` (startup did not check the
 * server), or by a reconnect that lands on a server demoted meanwhile. A writable replica (`replica-read-only no`)
 * granted locks there that services locking on its primary never saw: no exclusion between them. Each new connection is
 * now checked (INFO replication) before lock calls go through it; through a replica's, they fail with
 * LockConnectionError naming its primary, and the connection is checked again every second (a replica promoted
 * meanwhile serves calls again).
 *
 * Each case shows its fault: the server really is a replica that accepts writes.
 */
import type Redis from 'ioredis';
import { DistributedLockModuleOptions, LockConnectionError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { RedisProcess } from '../harness/redis-process';
import { UnhandledRejections } from './workers/support/fault-helpers';
import { pollUntil } from './workers/support/timing';

const PREFIX = 'rc:';

describe('a connection that reaches a replica after startup', () => {
  const services: LockService[] = [];
  const servers: RedisProcess[] = [];
  const clients: Redis[] = [];
  const unhandled = new UnhandledRejections();
  let primary: RedisProcess;

  beforeAll(async () => {
    unhandled.start();
    primary = await RedisProcess.start();
    // A replica's first sync starts at once, not after the default 5 s wait for more replicas.
    const admin = primary.client();
    await admin.config('SET', 'repl-diskless-sync-delay', '0');
    admin.disconnect();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    for (const c of clients.splice(0)) c.disconnect();
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    expect(unhandled.seen).toEqual([]);
  });
  afterAll(async () => {
    await primary.stop();
    unhandled.stop();
  });

  async function started(options: DistributedLockModuleOptions): Promise<LockService> {
    const service = new LockService({ keyPrefix: PREFIX, commandTimeout: 1_000, ...options });
    services.push(service);
    await service.onModuleInit();
    return service;
  }

  function clientOf(server: RedisProcess): Redis {
    const client = server.client();
    clients.push(client);
    return client;
  }

  /** `server` becomes a replica of the primary that accepts writes, its link up; returns a client of it. */
  async function makeWritableReplica(server: RedisProcess): Promise<Redis> {
    const client = clientOf(server);
    await client.config('SET', 'replica-read-only', 'no');
    await client.call('REPLICAOF', primary.host, String(primary.port));
    expect(await pollUntil(async () => /^master_link_status:up/m.test(await client.info('replication')), 5_000)).toBe(true);
    // The fault: it takes writes, as a lock grant there would be taken.
    expect(await client.set(`${PREFIX}probe`, '1')).toBe('OK');
    return client;
  }

  const lockKey = (key: string) => lockRedisKeys(PREFIX, key).lock;

  async function expectRefusedAsReplica(locks: LockService, key: string, replica: RedisProcess): Promise<void> {
    const error = await locks.acquire(key).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as Error).message).toContain(
      `Redis at 127.0.0.1:${replica.port} is a replica (INFO replication: role:slave, replicating 127.0.0.1:${primary.port})`,
    );
  }

  async function newServer(): Promise<RedisProcess> {
    const server = await RedisProcess.start();
    servers.push(server);
    return server;
  }

  it('requireRedisAtStartup: false on a writable replica: lock calls fail naming its primary, and no lock is written there', async () => {
    const replica = await newServer();
    const onReplica = await makeWritableReplica(replica);
    const locks = await started({ redis: replica.url, requireRedisAtStartup: false });
    // Before: granted, on a server whose locks its primary never sees.
    await expectRefusedAsReplica(locks, 'order:1', replica);
    expect(await locks.tryAcquire('order:1').catch((e: unknown) => e)).toBeInstanceOf(LockConnectionError);
    expect(await onReplica.exists(lockKey('order:1'))).toBe(0);
    expect(await clientOf(primary).exists(lockKey('order:1'))).toBe(0);
  });

  it('a replica promoted meanwhile serves lock calls again within seconds (checked again every second)', async () => {
    const replica = await newServer();
    const onReplica = await makeWritableReplica(replica);
    const locks = await started({ redis: replica.url, requireRedisAtStartup: false });
    await expectRefusedAsReplica(locks, 'order:2', replica);
    await onReplica.call('REPLICAOF', 'NO', 'ONE');
    let lock: Awaited<ReturnType<LockService['tryAcquire']>> = null;
    expect(
      await pollUntil(async () => {
        lock = await locks.tryAcquire('order:2').catch(() => null);
        return lock !== null;
      }, 3_000),
    ).toBe(true);
    expect(await onReplica.get(lockKey('order:2'))).toBe(lock!.token);
    expect(await lock!.release()).toBe(true);
  });

  it('a reconnect that lands on a server demoted to a writable replica (its clients killed, as Sentinel does): refused from then on', async () => {
    const server = await newServer();
    const locks = await started({ redis: server.url });
    const lock = await locks.acquire('order:3');
    expect(await lock.release()).toBe(true);
    const admin = await makeWritableReplica(server);
    const client = (locks as unknown as { engine: { store: { client: Redis } } }).engine.store.client;
    const before = client.stream;
    await admin.client('KILL', 'TYPE', 'normal');
    // The service's connection comes back (a new socket), to the demoted server.
    expect(await pollUntil(() => client.status === 'ready' && client.stream !== before, 5_000)).toBe(true);
    await expectRefusedAsReplica(locks, 'order:3', server);
    expect(await clientOf(server).exists(lockKey('order:3'))).toBe(0);
  });

  it('control: requireRedisAtStartup: false on a primary: lock calls go through', async () => {
    const locks = await started({ redis: primary.url, requireRedisAtStartup: false });
    const lock = await locks.acquire('order:4');
    expect(lock.isHeld()).toBe(true);
    expect(await clientOf(primary).get(lockKey('order:4'))).toBe(lock.token);
    expect(await lock.release()).toBe(true);
  });
});
