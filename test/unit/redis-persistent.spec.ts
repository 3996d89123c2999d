/**
 * `RedisProcess.start({ persistent: true })` (T15's Redis restarts): a restart must keep every write
 * the server acknowledged, after a clean stop and after kill -9 alike, or a "restart" fault would
 * silently be a "lost all locks" fault, which the lock cannot survive by design.
 */
import * as fs from 'fs';
import { killSurvivors, RedisProcess } from '../harness/redis-process';

describe('RedisProcess persistent', () => {
  let redis: RedisProcess;

  afterEach(async () => {
    await redis?.stop();
  });

  it('keeps acknowledged writes (with their expiry) across restart() and across kill9() + restart()', async () => {
    redis = await RedisProcess.start({ persistent: true });
    const client = redis.client();
    expect(await client.config('GET', 'appendfsync')).toEqual(['appendfsync', 'always']);
    await client.set('kept', '1');
    await client.set('expiring', '1', 'PX', 60_000);
    const firstPid = redis.pid;
    await redis.restart();
    expect(redis.pid).not.toBe(firstPid);
    expect(await client.get('kept')).toBe('1');
    await client.set('after-restart', '2');
    await redis.kill9();
    await redis.restart();
    expect(await client.mget('kept', 'after-restart')).toEqual(['1', '2']);
    const pttl = await client.pttl('expiring');
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(60_000);
  });

  it('stop() removes the data dir', async () => {
    redis = await RedisProcess.start({ persistent: true });
    const dir = redis.dataDir;
    expect(fs.existsSync(dir)).toBe(true);
    await redis.stop();
    expect(fs.existsSync(dir)).toBe(false);
  });
});

afterAll(() => {
  expect(killSurvivors()).toEqual([]);
});
