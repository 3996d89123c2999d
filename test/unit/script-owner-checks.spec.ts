/**
 * Owner checks of the scripts that no behaviour test reaches with a foreign holder on the key: a
 * mutation review removed each check and no test failed. The scripts run directly on a real Redis,
 * with the key held by another token, and must leave it as it is.
 *
 * - pass-on runs only after a release met more than 256 stale waiters; meanwhile the first live waiter
 *   can take the free key itself, and a pass-on that then popped the next waiter would overwrite it.
 * - A Redlock renewal takes a node back only where the key is free: one that arrives late, after
 *   another client took the node, must not overwrite that client's key.
 */
import { LOCK_SCRIPTS } from '../../lib/redis/scripts';
import { REDLOCK_SCRIPTS } from '../../lib/redis/redlock/redlock-scripts';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import type { LuaScript } from '../../lib/redis/lua-script';
import { redisSuite } from './core-helpers';

describe('script owner checks, with the key held by another token', () => {
  const suite = redisSuite();
  const run = (script: LuaScript, args: string[]) => suite.client.eval(script.lua, Number(script.numberOfKeys), ...args);

  it('pass-on leaves a held key and its queue alone', async () => {
    const keys = lockRedisKeys('owner-check:', 'pass-on');
    const holder = 'svc-a.30000.holder';
    const next = 'svc-b.30000.next';
    await suite.client.set(keys.lock, holder, 'PX', 30_000);
    await suite.client.rpush(keys.queue, next);
    await suite.client.zadd(keys.waiters, String(Date.now() + 10_000), next);
    expect(await run(LOCK_SCRIPTS.passOn, [keys.lock, keys.fence, keys.queue, keys.waiters, 'owner-check:waiters:'])).toBe(0);
    expect(await suite.client.get(keys.lock)).toBe(holder);
    expect(await suite.client.lrange(keys.queue, 0, -1)).toEqual([next]);
    // The control: with the key free, the same call hands it to that waiter.
    await suite.client.del(keys.lock);
    expect(await run(LOCK_SCRIPTS.passOn, [keys.lock, keys.fence, keys.queue, keys.waiters, 'owner-check:waiters:'])).toBe(0);
    expect(await suite.client.get(keys.lock)).toBe(next);
  });

  it('a Redlock renewal carrying a fencing token does not take a node held by another client', async () => {
    const keys = lockRedisKeys('owner-check:', 'redlock-renew');
    const other = 'svc-b.1000.other';
    await suite.client.set(keys.lock, other, 'PX', 60_000);
    expect(await run(REDLOCK_SCRIPTS.renew, [keys.lock, keys.fence, 'svc-a.1000.late', '1000', '1796000000000000'])).toBe(0);
    expect(await suite.client.get(keys.lock)).toBe(other);
    expect(await suite.client.pttl(keys.lock)).toBeGreaterThan(50_000);
    expect(await suite.client.get(keys.fence)).toBeNull();
    // The control: on a free node the same renewal takes the key back and raises the node's last token.
    await suite.client.del(keys.lock);
    expect(await run(REDLOCK_SCRIPTS.renew, [keys.lock, keys.fence, 'svc-a.1000.late', '1000', '1796000000000000'])).toBe(1);
    expect(await suite.client.get(keys.lock)).toBe('svc-a.1000.late');
    expect(await suite.client.get(keys.fence)).toBe('1796000000000000');
  });
});
