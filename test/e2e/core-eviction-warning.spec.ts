/**
 * A Redis that evicts keys when full (a cache's usual `maxmemory-policy`) may evict a held lock's key and let a
 * second holder in. It is said at startup, once per server, from `INFO memory`: single Redis and each Redlock
 * node; a server with `noeviction` or no `maxmemory` is not named. First, the hazard itself, on a real server.
 */
import { Logger } from '@nestjs/common';
import { LockService } from '../../lib';
import { RedisProcess, killSurvivors } from '../harness/redis-process';
import { pollUntil } from './workers/support/timing';

const EVICTING = ['--maxmemory', '4mb', '--maxmemory-policy', 'volatile-lru'];

describe('a Redis that evicts keys when full', () => {
  const services: LockService[] = [];
  const servers: RedisProcess[] = [];
  let warnings: jest.SpyInstance;

  beforeEach(() => {
    warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(async () => {
    warnings.mockRestore();
    await Promise.all(services.splice(0).map((s) => s.close()));
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));

  async function server(args: string[]): Promise<RedisProcess> {
    const started = await RedisProcess.start({ args });
    servers.push(started);
    return started;
  }

  async function service(options: ConstructorParameters<typeof LockService>[0]): Promise<LockService> {
    const created = new LockService(options);
    services.push(created);
    await created.onModuleInit();
    return created;
  }

  const evictionWarnings = () => warnings.mock.calls.map(([m]) => String(m)).filter((m) => /evicts keys when it is full/.test(m));

  it('the hazard: under memory pressure a held lock is evicted and a second caller is granted it', async () => {
    const redis = await server(EVICTING);
    const [holder, other] = [await service({ redis: redis.url }), await service({ redis: redis.url })];
    const lock = await holder.acquire('evictable');
    // Other data with an expiry fills the server (a cache beside the locks).
    const filler = redis.client();
    for (let i = 0; i < 100 && (await filler.exists('lock:{evictable}')) === 1; i++) {
      await filler.set(`cache:${i}`, 'x'.repeat(200_000), 'PX', 600_000);
    }
    const second = await other.tryAcquire('evictable');
    expect(second).not.toBeNull(); // granted while the first holder still holds it
    expect(lock.isHeld()).toBe(true);
    await second?.release();
  });

  it('single Redis: one warning at startup naming the server and the policy; none with noeviction', async () => {
    const evicting = await server(EVICTING);
    await service({ redis: evicting.url });
    expect(await pollUntil(() => evictionWarnings().length === 1, 2_000)).toBe(true);
    expect(evictionWarnings()[0]).toContain(`127.0.0.1:${evicting.port}`);
    expect(evictionWarnings()[0]).toContain('maxmemory-policy volatile-lru');

    const safe = await server(['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction']);
    await service({ redis: safe.url });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(evictionWarnings()).toHaveLength(1);
  });

  it('Redlock: the evicting node is named, the others are not', async () => {
    const nodes = [await server([]), await server(['--maxmemory', '4mb', '--maxmemory-policy', 'allkeys-lru']), await server([])];
    await service({ nodes: nodes.map((n) => n.url), nodeRecoveryDelay: 0 });
    expect(await pollUntil(() => evictionWarnings().length === 1, 2_000)).toBe(true);
    expect(evictionWarnings()[0]).toContain(`Redlock: Redis at 127.0.0.1:${nodes[1].port}`);
  });
});
